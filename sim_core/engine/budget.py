"""What a run may cost: memory estimated from the scenario and refused before anything big is
built, wall-clock time and cancellation watched while it runs.

    estimate_cost(config, workload=None) -> CostEstimate   named figures and an estimated peak
    check_budget(config, limits, workload=None)            BudgetError naming the field over its limit
    Limits.cli() / Limits.app() / None                     generous / conservative (env) / no limits

What is watched while the run goes (cancellation, wall-clock time, the rows held against the
memory limit) is in `run_watch.py`.

The estimate is `cost_estimate.py`'s, the limits `limits.py`'s; this module compares them and
words the refusal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim_core.config import SimulationConfig
from sim_core.engine.cost_estimate import (
    GIB,
    MIB,
    CostEstimate,
    count_rows,
    estimate_cost,
    estimate_with_rows,
    trace_files,
    trace_rows,
)
from sim_core.engine.limits import BudgetError, Limits

if TYPE_CHECKING:
    from sim_core.workload.model import Workload

__all__ = ["BudgetError", "CostEstimate", "Limits", "check_budget", "count_rows", "estimate_cost", "format_size"]



def check_budget(config: SimulationConfig, limits: Limits, workload: Workload | None = None) -> CostEstimate:
    """Estimate the run and refuse it when a figure is over its limit; returns the estimate.

    Without `workload` this runs before the workload is generated or read (request counts,
    trace rows, synthetic lengths from a sample); with it, on exact figures.

    Raises:
        BudgetError: one line naming the field, its value, the estimate, the limit and how to
            raise it.
        ConfigError, TraceError: as the run would (see estimate_cost).
    """
    rows = trace_rows(config) if workload is None else {}
    if rows and limits.max_trace_rows is not None:   # before anything reads a trace (a synthetic sample may)
        where = max(rows, key=rows.__getitem__)
        if rows[where] > limits.max_trace_rows:
            raise BudgetError(f"{where}: {rows[where]:,} rows in {_short(trace_files(config)[where])}, over the "
                              f"limit of {limits.max_trace_rows:,} rows for one run; use a smaller trace file, or "
                              f"raise the limit: {limits.raise_hint('max_trace_rows')}")
    estimate = estimate_with_rows(config, workload, rows)
    for name, value, figure in _figures(estimate):
        limit = getattr(limits, name)
        if value is not None and limit is not None and value > limit:
            field_name, what, advice = _describe(figure, config, estimate, memory=False)
            raise BudgetError(f"{field_name}: {what}, over the limit of {limit:,} {_UNITS[name]} for one run "
                              f"(estimated peak memory {format_size(estimate.peak_bytes)}); {advice}, or raise the "
                              f"limit: {limits.raise_hint(name)}")
    if limits.max_peak_bytes is not None and estimate.peak_bytes > limits.max_peak_bytes:
        figure = max((part for part in estimate.parts if part != "run"), key=estimate.parts.__getitem__)
        field_name, what, advice = _describe(figure, config, estimate, memory=True)
        limit = format_size(limits.max_peak_bytes)
        raise BudgetError(f"{field_name}: {what} need about {format_size(estimate.parts[figure])} (estimated peak "
                          f"memory {format_size(estimate.peak_bytes)}, over the limit of {limit}); "
                          f"{advice}, or raise the limit: {limits.raise_hint('max_peak_bytes')}")
    return estimate


_UNITS = {"max_replicas": "replicas", "max_blocks_per_replica": "blocks per replica",
          "max_requests": "requests", "max_request_steps": "request steps"}


def _figures(estimate: CostEstimate) -> list[tuple[str, int | None, str]]:
    """(Limits field, value, figure) in the order they are checked."""
    return [("max_replicas", estimate.num_replicas, "replicas"),
            ("max_blocks_per_replica", estimate.num_blocks_per_replica, "kv_blocks"),
            ("max_requests", estimate.num_requests, "requests"),
            ("max_request_steps", estimate.num_request_steps, "request_steps")]


def _describe(figure: str, config: SimulationConfig, estimate: CostEstimate, memory: bool) -> tuple[str, str, str]:
    """(field, what it amounts to, how to lower it) for a figure of the estimate; `memory`: the
    figure is refused for the memory it needs (recording less then helps)."""
    spec = config.workload
    trace = _short(spec.trace_file or "")
    if figure == "replicas":
        return (_replicas_field(config), f"{estimate.num_replicas:,} replicas", "use fewer replicas")
    if figure == "kv_blocks":
        return (_blocks_field(config), f"{estimate.num_blocks_per_replica:,} KV blocks per replica",
                "set a smaller scheduler.num_blocks")
    if figure == "trace_rows":
        return ("workload.trace_file", f"reading {estimate.num_trace_rows:,} trace rows",
                "use smaller trace files")
    if figure == "requests":
        if spec.trace_file:
            return ("workload.trace_file", f"{estimate.num_requests:,} requests from {trace}",
                    "replay fewer (workload.max_trace_requests, sample_fraction or a time window)")
        return "workload.num_requests", f"{estimate.num_requests:,} requests", "generate fewer"
    if figure == "request_steps":
        mean = (estimate.num_output_tokens or 0) / max(estimate.num_requests, 1)
        what = (f"{estimate.num_requests:,} requests x {mean:,.0f} output tokens on average "
                f"({estimate.num_request_steps:,} request steps, recorded at engine.record '{estimate.record}')")
        where = "workload.trace_file (num_decode_tokens)" if spec.trace_file else \
            "workload.num_requests x workload.output_tokens"
        advice = "fewer requests or shorter outputs" + (", or engine.record 'requests'"
                                                         if memory and estimate.record != "requests" else "")
        return where, what, advice
    if figure == "token_gaps":
        return ("workload.num_requests x workload.output_tokens",
                f"the gaps between {estimate.num_output_tokens or 0:,} output tokens",
                "fewer requests or shorter outputs")
    if figure == "block_events":
        return ("engine.record", f"'full' keeps every KV block allocation ({estimate.num_block_allocations:,})",
                "use engine.record 'batches'")
    return "scenario", figure, "simulate less"


def _replicas_field(config: SimulationConfig) -> str:
    if config.disaggregation.enabled:
        return "disaggregation.prefill.num_replicas + disaggregation.decode.num_replicas"
    return "cluster.num_replicas"


def _blocks_field(config: SimulationConfig) -> str:
    pd = config.disaggregation
    if pd.enabled:
        for name, pool in (("prefill", pd.prefill), ("decode", pd.decode)):
            if pool.num_blocks is not None:
                return f"disaggregation.{name}.num_blocks"
    if config.scheduler.num_blocks is not None:
        return "scheduler.num_blocks"
    return "scheduler.num_blocks (empty: the memory planner's)"


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2:]}"


def format_size(num_bytes: int) -> str:
    """A byte count as people read it: MiB below a GiB, else GiB with one decimal."""
    return f"{num_bytes / GIB:,.1f} GiB" if num_bytes >= GIB else f"{num_bytes / MIB:,.0f} MiB"
