"""A seeded synthetic workload: arrivals and lengths (optionally behind shared prompt prefixes),
or multi-turn conversations."""

from __future__ import annotations

import numpy as np

from sim_core.config.arrival import ReplayArrivalConfig
from sim_core.config.generators import SharedPrefixConfig
from sim_core.config.lengths import EmpiricalLengthConfig
from sim_core.config.workload import WorkloadConfig
from sim_core.workload.arrivals import generate_arrivals
from sim_core.workload.lengths import generate_lengths
from sim_core.workload.readers import ReadOptions, TraceRead, read_trace
from sim_core.workload.sessions import generate_sessions

__all__ = ["generate_arrivals", "generate_columns", "generate_lengths", "observed_inputs"]


def generate_columns(spec: WorkloadConfig, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Columns of `spec.num_requests` synthetic requests (arrival order)."""
    observed = observed_inputs(spec)
    if spec.sessions.enabled:
        columns = generate_sessions(spec, spec.num_requests, rng, observed)
    else:
        n = spec.num_requests
        columns = {"arrived_at": generate_arrivals(spec.arrival, n, rng, observed.get("arrivals")),
                   "num_prefill_tokens": generate_lengths(spec.prompt_tokens, n, rng, observed.get("prompt")),
                   "num_decode_tokens": generate_lengths(spec.output_tokens, n, rng, observed.get("output"))}
        columns = with_shared_prefix(columns, spec.shared_prefix, rng)
    if spec.parallel_samples > 1:
        columns["n"] = np.full(len(columns["arrived_at"]), spec.parallel_samples, dtype=np.int64)
    return columns


def with_shared_prefix(columns: dict, spec: SharedPrefixConfig, rng: np.random.Generator) -> dict:
    """Put a group's prefix of `spec.tokens` tokens before each prompt (a uniform group of
    `spec.num_groups` per request): the prefix_group and prefix_len columns say which."""
    if not spec.tokens:
        return columns
    n = len(columns["arrived_at"])
    group = rng.integers(0, spec.num_groups, n).astype(np.int64)
    return {**columns, "num_prefill_tokens": columns["num_prefill_tokens"] + spec.tokens,
            "prefix_group": group, "prefix_len": np.full(n, spec.tokens, dtype=np.int64)}


def observed_inputs(spec: WorkloadConfig) -> dict[str, np.ndarray]:
    """What replay arrivals and empirical lengths resample: read from their trace files."""
    observed = {}
    if isinstance(spec.arrival, ReplayArrivalConfig):
        read = _read(spec, spec.arrival.trace_file, spec.arrival.trace_format)
        if not read.has_arrivals:
            from sim_core.errors import ConfigError
            raise ConfigError(f"workload.arrival.trace_file: {spec.arrival.trace_file} has no arrival times "
                              f"(format {read.format})")
        observed["arrivals"] = read.workload.arrived_at
    for key, lengths in (("prompt", spec.prompt_tokens), ("output", spec.output_tokens)):
        if isinstance(lengths, EmpiricalLengthConfig):
            workload = _read(spec, lengths.trace_file, lengths.trace_format).workload
            observed[key] = workload.num_prefill_tokens if key == "prompt" else workload.num_decode_tokens
    return observed


def _read(spec: WorkloadConfig, path: str | None, fmt: str) -> TraceRead:
    assert path is not None, "the config requires trace_file for replay and empirical"
    return read_trace(path, ReadOptions(format=fmt, on_bad_rows=spec.on_bad_rows,
                                        max_bytes=spec.max_trace_mb * 1024 * 1024))
