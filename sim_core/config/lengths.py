"""A token-length distribution of a synthetic workload (prompt or output): one config model per
`distribution`, with only the knobs that distribution reads."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sim_core.config.choices import ChoiceBase, Choices, add_choices
from sim_core.config.generators import FORMAT_HELP, TraceFormat
from sim_core.config.sections import Strict


class LengthConfig(ChoiceBase):
    """A token-count distribution (prompt or output)."""

    model_config = Strict

    distribution: Literal["fixed", "uniform", "zipf", "lognormal", "empirical"] = Field("uniform", description=(
        "fixed: always `value`; uniform: integers in [min, max]; zipf: bounded Zipf on [min, max] "
        "with exponent theta (short lengths most likely); lognormal: with the given mean and "
        "log-space sigma, rounded and kept in [min, max]; empirical: resampled from trace_file."))


class FixedLengthConfig(LengthConfig):
    """The knob the fixed distribution reads."""

    distribution: Literal["fixed"] = "fixed"
    value: int = Field(256, ge=1, le=10_000_000, description="fixed: the token count.")


class BoundedLengthConfig(LengthConfig):
    """The distributions kept in [min, max] (uniform, zipf, lognormal)."""

    min: int = Field(16, ge=1, le=10_000_000, description="uniform/zipf/lognormal: smallest token count.")
    max: int = Field(1024, ge=1, le=10_000_000, description="uniform/zipf/lognormal: largest token count.")

    @model_validator(mode="after")
    def _min_le_max(self) -> BoundedLengthConfig:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class UniformLengthConfig(BoundedLengthConfig):
    """The knobs the uniform distribution reads."""

    distribution: Literal["uniform"] = "uniform"


class ZipfLengthConfig(BoundedLengthConfig):
    """The knobs the bounded Zipf distribution reads."""

    distribution: Literal["zipf"] = "zipf"
    theta: float = Field(1.1, gt=0.0, le=10.0, description="zipf: exponent; larger means more short requests.")


class LognormalLengthConfig(BoundedLengthConfig):
    """The knobs the clipped lognormal distribution reads."""

    distribution: Literal["lognormal"] = "lognormal"
    mean: float = Field(256.0, gt=0.0, le=10_000_000.0, description="lognormal: mean token count (before clipping).")
    sigma: float = Field(1.0, gt=0.0, le=5.0, description=(
        "lognormal: standard deviation of log(length); larger is more spread."))


class EmpiricalLengthConfig(LengthConfig):
    """The knobs the empirical distribution reads: the trace whose lengths it resamples."""

    distribution: Literal["empirical"] = "empirical"
    trace_file: str | None = Field(None, description=(
        "empirical: trace to resample from (its prompt lengths for prompts, output lengths for outputs)."))
    trace_format: TraceFormat = Field("auto", description=FORMAT_HELP)

    @model_validator(mode="after")
    def _check(self) -> EmpiricalLengthConfig:
        if not self.trace_file:
            raise ValueError("distribution 'empirical' needs trace_file (the trace to resample lengths from)")
        return self


LENGTHS = Choices(LengthConfig, "distribution", {
    "fixed": FixedLengthConfig, "uniform": UniformLengthConfig, "zipf": ZipfLengthConfig,
    "lognormal": LognormalLengthConfig, "empirical": EmpiricalLengthConfig})
add_choices(LENGTHS)
