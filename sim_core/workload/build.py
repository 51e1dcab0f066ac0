"""The scenario's workload: a trace (read, validated, transformed) or the synthetic generator,
then Vidur's max_model_len clipping."""

from __future__ import annotations

from typing import Any

import numpy as np

from sim_core.config import SimulationConfig
from sim_core.config.arrival import BurstyArrivalConfig, DiurnalArrivalConfig
from sim_core.config.workload import WorkloadConfig
from sim_core.errors import ConfigError, TraceError
from sim_core.workload.arrivals import generate_arrivals
from sim_core.workload.bounds import check_horizon, check_tokens
from sim_core.workload.model import Workload, clip_to_max_model_len
from sim_core.workload.readers import ReadOptions, TraceRead, read_trace
from sim_core.workload.synthetic import generate_columns, observed_inputs
from sim_core.workload.transforms import rescale_time, scale_lengths, transform_trace


def build_workload(config: SimulationConfig) -> Workload:
    """The scenario's requests: the trace (validated, transformed) or the seeded generator.

    Raises:
        TraceError: the trace file has a bad row or cannot be read.
        ConfigError: a generated request cannot fit max_model_len, or a transform cannot apply.
    """
    return build_workload_and_format(config)[0]


def build_workload_and_format(config: SimulationConfig) -> tuple[Workload, str]:
    """build_workload, also naming where the rows came from: the trace format or 'synthetic'."""
    spec = config.workload
    rng = np.random.default_rng(config.seed if spec.seed is None else spec.seed)
    fmt = "synthetic"
    # a rate so small that times overflow gives inf or NaN quietly: check_horizon refuses them
    # (here for generated arrivals, in rescale_time for scaled ones)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if spec.trace_file:
            workload, fmt = _trace_workload(spec, rng)
            workload = transform_trace(workload, spec, rng)
        else:
            workload = _synthetic_workload(spec, rng)
    check_tokens(workload.num_prefill_tokens, "workload.prefill_scale_factor: a scaled prompt")
    check_tokens(workload.num_decode_tokens, "workload.decode_scale_factor: a scaled output")
    return clip(config, workload), fmt


def _synthetic_workload(spec: WorkloadConfig, rng: np.random.Generator) -> Workload:
    columns: dict[str, Any] = generate_columns(spec, rng)   # the optional columns are arrays
    check_horizon(columns["arrived_at"], f"{_arrival_fields(spec)}: {len(columns['arrived_at'])} generated "
                  "arrivals", "raise the rate or lower workload.num_requests")
    check_tokens(columns["num_prefill_tokens"], "workload.sessions: a generated prompt (the conversation so far)"
                 if spec.sessions.enabled else "workload.prompt_tokens: a generated prompt")
    source = (f"synthetic ({spec.arrival.process}, {spec.num_requests} "
              f"{'turns' if spec.sessions.enabled else 'requests'})")
    workload = Workload(columns.pop("arrived_at"), columns.pop("num_prefill_tokens"),
                        columns.pop("num_decode_tokens"), source, (), **columns)
    workload = rescale_time(workload, spec.time_scale_factor, None)
    return scale_lengths(workload, spec.prefill_scale_factor, spec.decode_scale_factor)


def _arrival_fields(spec: WorkloadConfig) -> str:
    """The knobs that set how far generated arrivals reach."""
    arrival = spec.arrival
    if isinstance(arrival, BurstyArrivalConfig):
        fields = "workload.arrival (qps, off_qps, on_s, off_s)"
    elif isinstance(arrival, DiurnalArrivalConfig) and arrival.rate_curve:
        fields = "workload.arrival.rate_curve"
    else:
        fields = "workload.arrival.qps"
    return f"{fields} and workload.sessions.think_time_s" if spec.sessions.enabled else fields


def read_options(spec: WorkloadConfig) -> ReadOptions:
    """The reader options the workload section asks for."""
    return ReadOptions(format=spec.trace_format, on_bad_rows=spec.on_bad_rows,
                       max_bytes=spec.max_trace_mb * 1024 * 1024, model=spec.burstgpt_model,
                       log_type=spec.burstgpt_log_type, drop_duplicates=spec.drop_duplicates,
                       hash_block_size=spec.hash_block_size)


def _trace_workload(spec: WorkloadConfig, rng: np.random.Generator) -> tuple[Workload, str]:
    assert spec.trace_file is not None, "called for a trace workload only"
    read: TraceRead = read_trace(spec.trace_file, read_options(spec))
    workload = read.workload
    if not read.has_arrivals:   # lengths only: arrivals come from the arrival process
        times = generate_arrivals(spec.arrival, len(workload), rng, observed_inputs(spec).get("arrivals"))
        check_horizon(times, f"{_arrival_fields(spec)}: the arrivals generated for {len(workload)} trace rows",
                      "raise the rate")
        workload = workload.take(np.arange(len(workload)), arrived_at=times).with_notes(
            f"{spec.trace_file}: no arrival times in a {read.format} trace; generated them "
            f"({spec.arrival.process}, {spec.arrival.qps:g} req/s)")
    return workload, read.format


def clip(config: SimulationConfig, workload: Workload) -> Workload:
    """Vidur's rule: prompts of requests over max_model_len are shortened (and counted). Not for
    a policy that cuts the output where a request reaches max_model_len instead (sglang)."""
    if not config.scheduler.traits.clips_prompts:
        return workload
    prefill, decode, num_clipped, bad = clip_to_max_model_len(
        workload.num_prefill_tokens, workload.num_decode_tokens, config.max_model_len)
    if bad >= 0 and not config.workload.trace_file:
        raise ConfigError(f"workload.output_tokens: {decode[bad]} output tokens reach max_model_len "
                          f"{config.max_model_len}; lower the output length or raise max_model_len")
    if bad >= 0:
        raise TraceError(workload.source, f"num_decode_tokens {decode[bad]} alone reaches max_model_len "
                         f"{config.max_model_len}; the prompt cannot be clipped to fit",
                         row=bad + 1, column="num_decode_tokens")
    if not num_clipped:
        return workload
    return workload.take(np.arange(len(workload)), num_prefill_tokens=prefill).with_notes(
        f"{num_clipped} request(s) exceeded max_model_len {config.max_model_len}; "
        "their prompts were shortened to fit (as Vidur does)")
