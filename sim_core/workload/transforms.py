"""Transforms of a read trace, in order: time window, sampling, first-N, time scaling (factor or
target rate), length scaling. Each says what it did in the workload's notes."""

from __future__ import annotations

import numpy as np

from sim_core.config.workload import WorkloadConfig
from sim_core.errors import ConfigError, TraceError
from sim_core.workload.bounds import check_horizon
from sim_core.workload.model import Workload, scale_tokens


def transform_trace(workload: Workload, spec: WorkloadConfig, rng: np.random.Generator) -> Workload:
    """Apply the workload section's trace transforms (no-ops at their defaults)."""
    workload = time_window(workload, spec.window_start_s, spec.window_end_s)
    if spec.sample_fraction < 1.0:
        workload = sample(workload, spec.sample_fraction, rng)
    if spec.max_trace_requests and spec.max_trace_requests < len(workload):
        workload = workload.take(np.arange(spec.max_trace_requests))
    workload = rescale_time(workload, spec.time_scale_factor, spec.target_qps)
    return scale_lengths(workload, spec.prefill_scale_factor, spec.decode_scale_factor)


def time_window(workload: Workload, start: float, end: float | None) -> Workload:
    """Keep arrivals in [start, end) and shift them so the window starts at 0."""
    if start == 0.0 and end is None:
        return workload
    times = workload.arrived_at
    keep = np.flatnonzero((times >= start) & (times < (np.inf if end is None else end)))
    if not len(keep):
        raise TraceError(workload.source, f"no request arrives in the window [{start:g}, "
                         f"{'end' if end is None else f'{end:g}'}) s; the trace spans "
                         f"{times[0]:g} .. {times[-1]:g} s")
    note = (f"kept the {len(keep)} of {len(times)} request(s) arriving in [{start:g}, "
            f"{'end' if end is None else f'{end:g}'}) s; times shifted by -{start:g} s")
    return workload.take(keep, arrived_at=times[keep] - start).with_notes(note)


def sample(workload: Workload, fraction: float, rng: np.random.Generator) -> Workload:
    """A seeded random sample of round(fraction x rows) rows (at least 1), order kept."""
    count = max(1, round(fraction * len(workload)))
    rows = np.sort(rng.choice(len(workload), count, replace=False))
    return workload.take(rows).with_notes(f"sampled {count} of {len(workload)} request(s) (fraction {fraction:g})")


def rescale_time(workload: Workload, factor: float, target_qps: float | None) -> Workload:
    """Multiply arrival times by `factor`, or by whatever makes the mean rate `target_qps`.

    Raises:
        ConfigError: the scaled times pass the horizon of simulated time, or target_qps meets
            a trace whose requests all arrive at once.
    """
    times = workload.arrived_at
    if target_qps is not None:
        span = float(times[-1] - times[0]) if len(times) else 0.0
        if len(times) < 2 or span <= 0:
            raise ConfigError("workload.target_qps: the trace's requests all arrive at one instant; "
                              "its rate cannot be rescaled")
        rate = (len(times) - 1) / span
        factor = rate / target_qps
        note = f"arrival times scaled by {factor:.6g} (rate {rate:.6g} -> {target_qps:g} req/s)"
        with np.errstate(over="ignore", invalid="ignore"):   # inf or NaN: refused just below
            scaled = times * factor
        check_horizon(scaled, "workload.target_qps: scaled arrivals", "raise the target rate")
        return workload.take(np.arange(len(times)), arrived_at=scaled).with_notes(note)
    if factor == 1.0:
        return workload
    scaled = times * factor
    check_horizon(scaled, "workload.time_scale_factor: scaled arrivals", "lower the factor")
    return workload.take(np.arange(len(times)), arrived_at=scaled)


def scale_lengths(workload: Workload, prefill_factor: float, decode_factor: float) -> Workload:
    if prefill_factor == 1.0 and decode_factor == 1.0:
        return workload
    return workload.take(np.arange(len(workload)),
                         num_prefill_tokens=scale_tokens(workload.num_prefill_tokens, prefill_factor),
                         num_decode_tokens=scale_tokens(workload.num_decode_tokens, decode_factor))
