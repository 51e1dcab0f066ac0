"""Per-request rows and the run summary (percentiles, throughput, preemptions, KV use)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

PERCENTILES = (50, 90, 99)


def quantiles(values: np.ndarray, percents: Sequence[float], weights: np.ndarray | None = None) -> list[float]:
    """For each p in `percents`, the smallest observed value with at least p% of the (weighted)
    samples at or below it (the inverted-CDF definition); NaN when there are no samples."""
    values = np.asarray(values, dtype=np.float64)
    if weights is not None:
        keep = weights > 0
        values, weights = values[keep], np.asarray(weights[keep], dtype=np.int64)
    if not len(values):
        return [float("nan")] * len(percents)
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order]) if weights is not None else np.arange(1, len(values) + 1)
    total = int(cumulative[-1])
    ranks = [-(-p * total // 100) for p in percents]  # ceil(p% of the samples), in integers
    return [float(values[order][np.searchsorted(cumulative, max(rank, 1), side="left")]) for rank in ranks]


def request_table(rows: dict[str, list], client_latency_s: float = 0.0) -> pd.DataFrame:
    """Per-request DataFrame with derived latencies (NaN where an event never happened).

    `client_latency_s` (an API server's share, see SchedulerConfig.client_latency_s) is added to
    TTFT and E2E, which are what the client sees; the event times stay the engine's."""
    frame = pd.DataFrame(rows)
    for column in ("scheduled_at", "prefill_completed_at", "completed_at"):
        frame[column] = frame[column].where(frame[column] >= 0)
    frame["ttft"] = frame["prefill_completed_at"] - frame["arrived_at"] + client_latency_s
    frame["e2e"] = frame["completed_at"] - frame["arrived_at"] + client_latency_s
    frame["scheduling_delay"] = frame["scheduled_at"] - frame["arrived_at"]
    decode_gaps = (frame["num_decode_tokens"] - 1).where(frame["num_decode_tokens"] > 1)
    frame["tpot"] = (frame["completed_at"] - frame["prefill_completed_at"]) / decode_gaps
    frame["tbt_max"] = frame["tbt_max"].where(frame["num_decode_tokens"] > 1)
    return frame


def summarize(requests: pd.DataFrame, token_gaps: tuple[np.ndarray, np.ndarray], kv_area: list[float],
              kv_peak: list[int], num_blocks: int, num_batches: int) -> dict:
    """The headline figures of a run, JSON-serializable. `token_gaps`: the times between
    consecutive output tokens as (values, counts) (see `Recorder.gaps`); `kv_area` / `kv_peak`: per replica,
    the integral over time of its KV blocks in use and their most; `num_blocks`: KV blocks per
    replica."""
    finished = requests[requests["status"] == "finished"]
    start = float(requests["arrived_at"].min()) if len(requests) else 0.0
    end = float(finished["completed_at"].max()) if len(finished) else start
    makespan = end - start
    # every sequence of a request decodes num_decode_tokens (n parallel samples: n x as many)
    output = finished["num_decode_tokens"] * finished["n"]
    swaps = requests["num_swaps"]
    summary = {
        "num_requests": int(len(requests)),
        "num_finished": int(len(finished)),
        "num_rejected": int((requests["status"] == "rejected").sum()),
        "num_ignored": int((requests["status"] == "ignored").sum()),
        "num_batches": int(num_batches),
        "makespan_s": makespan,
        "throughput_rps": len(finished) / makespan if makespan > 0 else float("nan"),
        "output_tokens_per_s": (float(output.sum()) / makespan if makespan > 0 else float("nan")),
        "total_tokens_per_s": (float((finished["num_prefill_tokens"] + output).sum())
                               / makespan if makespan > 0 else float("nan")),
        "num_preemptions": int((requests["num_restarts"] + swaps).sum()),
        "num_requests_preempted": int(((requests["num_restarts"] + swaps) > 0).sum()),
        "num_swap_outs": int(swaps.sum()),
        "num_truncated": int(requests["truncated"].sum()),
        "prompt_tokens_per_s": (float(finished["num_prefill_tokens"].sum()) / makespan
                                if makespan > 0 else float("nan")),
    }
    summary.update(prefix_cache_figures(requests))
    for name in ("ttft", "e2e", "scheduling_delay"):
        for p, value in zip(PERCENTILES, quantiles(finished[name].to_numpy(), PERCENTILES)):
            summary[f"{name}_p{p}_s"] = value
    gaps, counts = token_gaps
    for p, value in zip(PERCENTILES, quantiles(gaps, PERCENTILES, counts)):
        summary[f"tbt_p{p}_s"] = value
    capacity = num_blocks * makespan
    summary["kv_utilization_mean"] = (float(np.mean(kv_area)) / capacity) if capacity > 0 else 0.0
    summary["kv_utilization_peak"] = float(max(kv_peak)) / num_blocks if num_blocks else 0.0
    return summary


def prefix_cache_figures(requests: pd.DataFrame) -> dict:
    """Prefix-cache hits over every admission: cached prompt tokens (computed by nobody, yet
    counted in prompt throughput) and their share of the prompt tokens looked up (0 when no
    cache was consulted)."""
    cached, looked_up = int(requests["num_cached_tokens"].sum()), int(requests["num_lookup_tokens"].sum())
    return {"prefix_cached_tokens": cached, "prefix_hit_rate": cached / looked_up if looked_up else 0.0}
