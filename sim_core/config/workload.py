"""Workload section: a trace file to replay (any supported format, with transforms), or a
seeded synthetic generator."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from sim_core.config.arrival import ArrivalConfig, PoissonArrivalConfig
from sim_core.config.choices import BY_CHOICE
from sim_core.config.generators import FORMAT_HELP, SessionConfig, SharedPrefixConfig, TraceFormat
from sim_core.config.lengths import LengthConfig, UniformLengthConfig
from sim_core.config.sections import Strict

__all__ = ["ArrivalConfig", "LengthConfig", "SessionConfig", "SharedPrefixConfig", "WorkloadConfig"]

ArrivalSection = Annotated[ArrivalConfig, BY_CHOICE]     # the member its `process` names
LengthSection = Annotated[LengthConfig, BY_CHOICE]       # the member its `distribution` names


class WorkloadConfig(BaseModel):
    """The requests to serve: replay `trace_file`, or generate `num_requests` synthetically.
    Transforms apply in this order: window, sampling, max_trace_requests, time scaling (or
    target_qps), length scaling, max_model_len clipping."""

    model_config = Strict

    trace_file: str | None = Field(None, description=(
        "Trace to replay: CSV (canonical/Vidur replay, Vidur lengths, Azure, BurstGPT) or Mooncake "
        "JSON lines. A relative path resolves against the scenario file's folder."))
    trace_format: TraceFormat = Field("auto", description=FORMAT_HELP)
    on_bad_rows: Literal["error", "skip"] = Field("error", description=(
        "error: stop at the first bad row, naming row, column and reason; skip: drop bad rows and "
        "report how many were dropped and why."))
    max_trace_mb: int = Field(4096, ge=1, le=65_536, description="Refuse trace files larger than this (MiB).")
    burstgpt_model: str | None = Field(None, description=(
        "BurstGPT: keep only rows of this Model (e.g. ChatGPT, GPT-4)."))
    burstgpt_log_type: str | None = Field(None, description=(
        "BurstGPT: keep only rows of this Log Type (e.g. 'Conversation log', 'API log')."))
    drop_duplicates: bool = Field(False, description=(
        "Drop rows equal to an earlier row in arrival time and both lengths (they are counted either way)."))
    hash_block_size: int = Field(512, ge=1, le=1_000_000, description=(
        "Tokens per prefix-block hash id in the trace (Mooncake uses 512)."))
    num_requests: int = Field(200, ge=1, le=100_000_000, description=(
        "Synthetic: how many requests to generate (with sessions: how many turns)."))
    max_trace_requests: int = Field(0, ge=0, le=100_000_000, description=(
        "Trace: replay only the first N rows (0 = all)."))
    window_start_s: float = Field(0.0, ge=0.0, le=1e9, description=(
        "Trace: keep requests arriving at or after this time (seconds after the trace's start); "
        "times are shifted so the window starts at 0."))
    window_end_s: float | None = Field(None, gt=0.0, le=1e9, description=(
        "Trace: keep requests arriving before this time (seconds after the trace's start; empty = to the end)."))
    sample_fraction: float = Field(1.0, gt=0.0, le=1.0, description=(
        "Trace: keep a seeded random sample of this fraction of the rows (arrival order kept)."))
    target_qps: float | None = Field(None, gt=0.0, le=1_000_000.0, description=(
        "Trace: rescale arrival times so the mean rate is this many requests per second "
        "(replaces time_scale_factor)."))
    arrival: ArrivalSection = Field(default_factory=PoissonArrivalConfig, description=(
        "Synthetic arrival process (also used for vidur_lengths traces, which have no times)."))
    prompt_tokens: LengthSection = Field(
        default_factory=lambda: UniformLengthConfig(min=64, max=1024),
        description="Synthetic prompt (prefill) length distribution.")
    output_tokens: LengthSection = Field(
        default_factory=lambda: UniformLengthConfig(min=16, max=512),
        description="Synthetic output (decode) length distribution.")
    sessions: SessionConfig = Field(default_factory=SessionConfig, description="Synthetic multi-turn conversations.")
    shared_prefix: SharedPrefixConfig = Field(default_factory=SharedPrefixConfig, description=(
        "Synthetic shared prompt prefixes (system prompts): the prefix_group and prefix_len columns."))
    parallel_samples: int = Field(1, ge=1, le=256, description=(
        "Synthetic: samples (n) each request asks for; above 1 the workload gets an n column, which "
        "vllm_v0 serves as one group of sequences sharing the prompt (other policies: one sequence)."))
    seed: int | None = Field(None, ge=0, le=2**32 - 1, description=(
        "Seed of the generator and of sampling; defaults to the scenario's seed."))
    time_scale_factor: float = Field(1.0, gt=0.0, le=1e6, description=(
        "Multiply arrival times by this (0.5 doubles the request rate)."))
    prefill_scale_factor: float = Field(1.0, gt=0.0, le=1e6, description="Multiply prompt lengths by this.")
    decode_scale_factor: float = Field(1.0, gt=0.0, le=1e6, description="Multiply output lengths by this.")

    @model_validator(mode="after")
    def _window(self) -> WorkloadConfig:
        if self.window_end_s is not None and self.window_end_s <= self.window_start_s:
            raise ValueError(f"window_end_s ({self.window_end_s}) must exceed window_start_s ({self.window_start_s})")
        return self
