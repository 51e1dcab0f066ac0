"""Workloads: replay a trace or generate requests; always validated, always in arrival order."""

from __future__ import annotations

import numpy as np

from sim_core.config import SimulationConfig
from sim_core.errors import ConfigError, TraceError
from sim_core.workload.model import Workload, clip_to_max_model_len, scale_tokens
from sim_core.workload.synthetic import generate_arrivals, generate_lengths
from sim_core.workload.trace import (
    REPLAY_COLUMNS,
    read_replay_trace,
    write_replay_trace,
)

__all__ = ["REPLAY_COLUMNS", "Workload", "build_workload", "read_replay_trace", "write_replay_trace"]


def build_workload(config: SimulationConfig) -> Workload:
    """The scenario's requests: the trace (validated) or the seeded synthetic generator.

    Raises:
        TraceError: the trace file has a bad row or cannot be read.
    """
    spec = config.workload
    if spec.trace_file:
        arrived, prefill, decode, notes = read_replay_trace(spec.trace_file)
        if spec.max_trace_requests:
            arrived, prefill, decode = (a[: spec.max_trace_requests] for a in (arrived, prefill, decode))
        source = spec.trace_file
    else:
        rng = np.random.default_rng(config.seed if spec.seed is None else spec.seed)
        arrived = generate_arrivals(spec.arrival, spec.num_requests, rng)
        prefill = generate_lengths(spec.prompt_tokens, spec.num_requests, rng)
        decode = generate_lengths(spec.output_tokens, spec.num_requests, rng)
        notes, source = [], f"synthetic ({spec.arrival.process}, {spec.num_requests} requests)"
    return _finish(config, source, arrived * spec.time_scale_factor,
                   scale_tokens(prefill, spec.prefill_scale_factor),
                   scale_tokens(decode, spec.decode_scale_factor), list(notes))


def _finish(config, source, arrived, prefill, decode, notes) -> Workload:
    prefill, decode, num_clipped, bad = clip_to_max_model_len(prefill, decode, config.max_model_len)
    if bad >= 0 and not config.workload.trace_file:
        raise ConfigError(f"workload.output_tokens: {decode[bad]} output tokens reach max_model_len "
                          f"{config.max_model_len}; lower the output length or raise max_model_len")
    if bad >= 0:
        raise TraceError(source, f"num_decode_tokens {decode[bad]} alone reaches max_model_len "
                         f"{config.max_model_len}; the prompt cannot be clipped to fit",
                         row=bad + 1, column="num_decode_tokens")
    if num_clipped:
        notes.append(f"{num_clipped} request(s) exceeded max_model_len {config.max_model_len}; "
                     "their prompts were shortened to fit (as Vidur does)")
    return Workload(np.asarray(arrived, dtype=np.float64), prefill, decode, source, tuple(notes))
