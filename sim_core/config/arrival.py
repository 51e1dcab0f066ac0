"""The arrival process of a synthetic workload: one config model per `process`, with only the
knobs that process reads."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sim_core.config.choices import ChoiceBase, Choices, add_choices
from sim_core.config.generators import FORMAT_HELP, TraceFormat
from sim_core.config.sections import Strict


class ArrivalConfig(ChoiceBase):
    """When requests (or, with sessions, conversations) arrive."""

    model_config = Strict

    process: Literal["poisson", "gamma", "constant", "static", "bursty", "diurnal", "replay"] = Field(
        "poisson", description=(
        "poisson: exponential gaps at rate qps; constant: evenly spaced, one every 1/qps seconds "
        "from t = 0; gamma: gamma gaps with mean 1/qps and coefficient "
        "of variation cv (cv > 1 is burstier); static: everything at t = 0; bursty: on/off periods "
        "(Poisson at qps while on, off_qps while off); diurnal: Poisson with a rate that follows a "
        "daily curve; replay: the arrival times of trace_file."))
    # every process has it: the app's rate slider and run-length guess, and the capacity search, set or read it
    qps: float = Field(2.0, gt=0.0, le=1_000_000.0, description=(
        "Mean arrival rate in requests per second (bursty: the rate during bursts; diurnal: the "
        "mean of the sine curve)."))


class PoissonArrivalConfig(ArrivalConfig):
    """The knobs the Poisson process reads."""

    process: Literal["poisson"] = "poisson"


class GammaArrivalConfig(ArrivalConfig):
    """The knobs the gamma process reads."""

    process: Literal["gamma"] = "gamma"
    cv: float = Field(1.0, gt=0.0, le=100.0, description="gamma: coefficient of variation of the gaps.")


class ConstantArrivalConfig(ArrivalConfig):
    """The knobs the constant process reads: request i arrives at i / qps (the first at t = 0,
    like every process here; the limit of gamma as cv -> 0)."""

    process: Literal["constant"] = "constant"


class StaticArrivalConfig(ArrivalConfig):
    """The knobs the static process reads (everything arrives at t = 0)."""

    process: Literal["static"] = "static"


class BurstyArrivalConfig(ArrivalConfig):
    """The knobs the bursty (on/off) process reads."""

    process: Literal["bursty"] = "bursty"
    on_s: float = Field(10.0, gt=0.0, le=1e7, description="bursty: length of each burst, seconds.")
    off_s: float = Field(20.0, gt=0.0, le=1e7, description="bursty: length of each lull between bursts, seconds.")
    off_qps: float = Field(0.0, ge=0.0, le=1_000_000.0, description="bursty: arrival rate during lulls, req/s.")


class DiurnalArrivalConfig(ArrivalConfig):
    """The knobs the diurnal process reads."""

    process: Literal["diurnal"] = "diurnal"
    period_s: float = Field(86_400.0, gt=0.0, le=1e8, description=(
        "diurnal: length of one cycle of the rate curve, seconds."))
    amplitude: float = Field(0.5, ge=0.0, le=1.0, description=(
        "diurnal: the rate swings between qps x (1 - amplitude) and qps x (1 + amplitude) (a sine over period_s)."))
    rate_curve: list[float] = Field(default_factory=list, max_length=10_000, description=(
        "diurnal: rates (req/s) at evenly spaced points across period_s, repeated and linearly "
        "interpolated; overrides qps and amplitude when given (e.g. 24 hourly rates)."))

    @model_validator(mode="after")
    def _check(self) -> DiurnalArrivalConfig:
        if any(rate < 0 for rate in self.rate_curve) or (self.rate_curve and max(self.rate_curve) <= 0):
            raise ValueError("rate_curve: rates must be >= 0 and at least one > 0")
        return self


class ReplayArrivalConfig(ArrivalConfig):
    """The knobs replay reads: the trace whose arrival times it uses."""

    process: Literal["replay"] = "replay"
    trace_file: str | None = Field(None, description=(
        "replay: trace whose arrival times to use (any format with times)."))
    trace_format: TraceFormat = Field("auto", description=FORMAT_HELP)

    @model_validator(mode="after")
    def _check(self) -> ReplayArrivalConfig:
        if not self.trace_file:
            raise ValueError("process 'replay' needs trace_file (the trace whose arrival times to use)")
        return self


ARRIVALS = Choices(ArrivalConfig, "process", {
    "poisson": PoissonArrivalConfig, "gamma": GammaArrivalConfig, "constant": ConstantArrivalConfig,
    "static": StaticArrivalConfig,
    "bursty": BurstyArrivalConfig, "diurnal": DiurnalArrivalConfig, "replay": ReplayArrivalConfig})
add_choices(ARRIVALS)
