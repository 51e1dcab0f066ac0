"""Synthetic workload knobs: arrival process, length distributions, multi-turn sessions."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from sim_core.config.sections import Strict

TraceFormat = Literal["auto", "canonical", "vidur", "vidur_lengths", "azure", "burstgpt", "mooncake"]
FORMAT_HELP = ("Format of the file: auto (detected from its columns), canonical, vidur, vidur_lengths, "
               "azure, burstgpt or mooncake (JSON lines).")


class ArrivalConfig(BaseModel):
    """When requests (or, with sessions, conversations) arrive."""

    model_config = Strict

    process: Literal["poisson", "gamma", "static", "bursty", "diurnal", "replay"] = Field("poisson", description=(
        "poisson: exponential gaps at rate qps; gamma: gamma gaps with mean 1/qps and coefficient "
        "of variation cv (cv > 1 is burstier); static: everything at t = 0; bursty: on/off periods "
        "(Poisson at qps while on, off_qps while off); diurnal: Poisson with a rate that follows a "
        "daily curve; replay: the arrival times of trace_file."))
    qps: float = Field(2.0, gt=0.0, le=1_000_000.0, description=(
        "Mean arrival rate in requests per second (bursty: the rate during bursts; diurnal: the "
        "mean of the sine curve)."))
    cv: float = Field(1.0, gt=0.0, le=100.0, description="gamma: coefficient of variation of the gaps.")
    on_s: float = Field(10.0, gt=0.0, le=1e7, description="bursty: length of each burst, seconds.")
    off_s: float = Field(20.0, gt=0.0, le=1e7, description="bursty: length of each lull between bursts, seconds.")
    off_qps: float = Field(0.0, ge=0.0, le=1_000_000.0, description="bursty: arrival rate during lulls, req/s.")
    period_s: float = Field(86_400.0, gt=0.0, le=1e8, description=(
        "diurnal: length of one cycle of the rate curve, seconds."))
    amplitude: float = Field(0.5, ge=0.0, le=1.0, description=(
        "diurnal: the rate swings between qps x (1 - amplitude) and qps x (1 + amplitude) (a sine over period_s)."))
    rate_curve: list[float] = Field(default_factory=list, max_length=10_000, description=(
        "diurnal: rates (req/s) at evenly spaced points across period_s, repeated and linearly "
        "interpolated; overrides qps and amplitude when given (e.g. 24 hourly rates)."))
    trace_file: str | None = Field(None, description=(
        "replay: trace whose arrival times to use (any format with times)."))
    trace_format: TraceFormat = Field("auto", description=FORMAT_HELP)

    @model_validator(mode="after")
    def _check(self) -> ArrivalConfig:
        if self.process == "replay" and not self.trace_file:
            raise ValueError("process 'replay' needs trace_file (the trace whose arrival times to use)")
        if any(rate < 0 for rate in self.rate_curve) or (self.rate_curve and max(self.rate_curve) <= 0):
            raise ValueError("rate_curve: rates must be >= 0 and at least one > 0")
        return self


class LengthConfig(BaseModel):
    """A token-count distribution (prompt or output)."""

    model_config = Strict

    distribution: Literal["fixed", "uniform", "zipf", "lognormal", "empirical"] = Field("uniform", description=(
        "fixed: always `value`; uniform: integers in [min, max]; zipf: bounded Zipf on [min, max] "
        "with exponent theta (short lengths most likely); lognormal: with the given mean and "
        "log-space sigma, rounded and kept in [min, max]; empirical: resampled from trace_file."))
    value: int = Field(256, ge=1, le=10_000_000, description="fixed: the token count.")
    min: int = Field(16, ge=1, le=10_000_000, description="uniform/zipf/lognormal: smallest token count.")
    max: int = Field(1024, ge=1, le=10_000_000, description="uniform/zipf/lognormal: largest token count.")
    theta: float = Field(1.1, gt=0.0, le=10.0, description="zipf: exponent; larger means more short requests.")
    mean: float = Field(256.0, gt=0.0, le=10_000_000.0, description="lognormal: mean token count (before clipping).")
    sigma: float = Field(1.0, gt=0.0, le=5.0, description=(
        "lognormal: standard deviation of log(length); larger is more spread."))
    trace_file: str | None = Field(None, description=(
        "empirical: trace to resample from (its prompt lengths for prompts, output lengths for outputs)."))
    trace_format: TraceFormat = Field("auto", description=FORMAT_HELP)

    @model_validator(mode="after")
    def _min_le_max(self) -> LengthConfig:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        if self.distribution == "empirical" and not self.trace_file:
            raise ValueError("distribution 'empirical' needs trace_file (the trace to resample lengths from)")
        return self


class SessionConfig(BaseModel):
    """Multi-turn conversations: each turn's prompt holds the whole conversation so far."""

    model_config = Strict

    enabled: bool = Field(False, description=(
        "Generate conversations: `arrival` then says when conversations start, prompt_tokens is "
        "each turn's new user input, and num_requests counts turns."))
    min_turns: int = Field(1, ge=1, le=10_000, description="Fewest turns per conversation.")
    max_turns: int = Field(6, ge=1, le=10_000, description="Most turns per conversation (uniform in between).")
    think_time_s: float = Field(5.0, ge=0.0, le=1e6, description=(
        "Mean pause (exponential) between receiving an answer and sending the next turn, seconds."))
    response_s_per_token: float = Field(0.02, ge=0.0, le=100.0, description=(
        "Estimated seconds to generate one output token, used to place the next turn after the "
        "answer (open loop only; closed_loop waits for the simulated answer instead)."))
    system_prompt_tokens: int = Field(0, ge=0, le=1_000_000, description=(
        "Tokens of a system prompt shared by many conversations (0: none); added to every prompt."))
    num_system_prompts: int = Field(1, ge=1, le=1_000_000, description=(
        "How many distinct system prompts conversations draw from (uniformly)."))

    closed_loop: bool = Field(False, description=(
        "Closed loop (agentic sessions): a session's next turn arrives a pause after its previous "
        "turn completes in the simulation, not at a time fixed in advance. Applies to generated "
        "sessions and to traces with a session_id column (turns ordered by turn, else by arrival)."))
    closed_loop_gap: Literal["workload", "think_time"] = Field("workload", description=(
        "closed loop: the pause before a later turn: workload (its arrival time minus the previous "
        "turn's: for generated sessions exactly the drawn think time; for a trace the recorded gap, "
        "which also holds the recorded answer time) or think_time (exponential with mean "
        "think_time_s, seeded)."))

    @model_validator(mode="after")
    def _turns(self) -> SessionConfig:
        if self.min_turns > self.max_turns:
            raise ValueError(f"min_turns ({self.min_turns}) must not exceed max_turns ({self.max_turns})")
        return self


class SharedPrefixConfig(BaseModel):
    """Prompt prefixes shared by many requests (system prompts), for prefix-caching workloads."""

    model_config = Strict

    tokens: int = Field(0, ge=0, le=1_000_000, description=(
        "Tokens of a prefix (a system prompt) put before every generated prompt; requests with the "
        "same prefix group share it exactly (0 = none). Without sessions; sessions have "
        "system_prompt_tokens."))
    num_groups: int = Field(1, ge=1, le=1_000_000, description=(
        "How many distinct prefixes the requests draw from (uniformly): fewer means more sharing."))
