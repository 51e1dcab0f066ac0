"""Workload section: a trace file to replay, or a seeded synthetic generator."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from sim_core.config.sections import Strict


class ArrivalConfig(BaseModel):
    """When requests arrive."""

    model_config = Strict

    process: Literal["poisson", "gamma", "static"] = Field("poisson", description=(
        "poisson: exponential gaps at rate qps; gamma: gamma gaps with mean 1/qps and "
        "coefficient of variation cv (cv > 1 is burstier); static: everything at t = 0."))
    qps: float = Field(2.0, gt=0.0, le=1_000_000.0, description="Mean arrival rate, requests per second.")
    cv: float = Field(1.0, gt=0.0, le=100.0, description="gamma: coefficient of variation of the gaps.")


class LengthConfig(BaseModel):
    """A token-count distribution (prompt or output)."""

    model_config = Strict

    distribution: Literal["fixed", "uniform", "zipf"] = Field("uniform", description=(
        "fixed: always `value`; uniform: integers in [min, max]; zipf: bounded Zipf on "
        "[min, max] with exponent theta (short lengths most likely)."))
    value: int = Field(256, ge=1, le=10_000_000, description="fixed: the token count.")
    min: int = Field(16, ge=1, le=10_000_000, description="uniform/zipf: smallest token count.")
    max: int = Field(1024, ge=1, le=10_000_000, description="uniform/zipf: largest token count.")
    theta: float = Field(1.1, gt=0.0, le=10.0, description="zipf: exponent; larger means more short requests.")

    @model_validator(mode="after")
    def _min_le_max(self) -> "LengthConfig":
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class WorkloadConfig(BaseModel):
    """The requests to serve: replay `trace_file`, or generate `num_requests` synthetically."""

    model_config = Strict

    trace_file: str | None = Field(None, description=(
        "CSV in Vidur's replay format (arrived_at,num_prefill_tokens,num_decode_tokens; seconds "
        "and tokens). A relative path resolves against the scenario file's folder."))
    num_requests: int = Field(200, ge=1, le=100_000_000, description=(
        "Synthetic: how many requests to generate."))
    max_trace_requests: int = Field(0, ge=0, le=100_000_000, description=(
        "Trace: replay only the first N rows (0 = all)."))
    arrival: ArrivalConfig = Field(default_factory=ArrivalConfig, description="Synthetic arrival process.")
    prompt_tokens: LengthConfig = Field(
        default_factory=lambda: LengthConfig(distribution="uniform", min=64, max=1024),
        description="Synthetic prompt (prefill) length distribution.")
    output_tokens: LengthConfig = Field(
        default_factory=lambda: LengthConfig(distribution="uniform", min=16, max=512),
        description="Synthetic output (decode) length distribution.")
    seed: int | None = Field(None, ge=0, le=2**32 - 1, description=(
        "Seed of the generator; defaults to the scenario's seed."))
    time_scale_factor: float = Field(1.0, gt=0.0, le=1e6, description=(
        "Multiply arrival times by this (0.5 doubles the request rate)."))
    prefill_scale_factor: float = Field(1.0, gt=0.0, le=1e6, description="Multiply prompt lengths by this.")
    decode_scale_factor: float = Field(1.0, gt=0.0, le=1e6, description="Multiply output lengths by this.")
