"""Per-pool figures of a P/D-disaggregated run: KV use, busy share and queue per pool, and the
KV transfers between them (added to the run's summary under `prefill_...`, `decode_...`,
`transfer_...`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim_core.portable_math import dot
from sim_core.results.metrics import quantiles

if TYPE_CHECKING:
    from sim_core.results.record import Recorder
    from sim_core.results.replicas import PoolInfo


def transfer_frame(columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """The KV transfers (columns in completion order) in start order, ties by request id."""
    order = np.lexsort((columns["request_id"], columns["start"]))
    return pd.DataFrame({name: values[order] for name, values in columns.items()})


def pool_figures(pools: list[PoolInfo], recorder: Recorder, requests: pd.DataFrame, stages: pd.DataFrame,
                 series: pd.DataFrame, makespan: float) -> dict:
    """KV utilization (mean, peak), busy share of the stages and mean waiting queue per pool;
    the headline KV utilization becomes the mean (and peak) over replicas of each replica's own
    share (pools may have different numbers of blocks)."""
    figures: dict[str, float] = {}
    shares: list[float] = []
    peaks: list[float] = []
    start = float(requests["arrived_at"].min()) if len(requests) else 0.0
    for pool in pools:
        ids, name = list(pool.replica_ids), pool.name
        share = [recorder.kv_area[r] / (pool.num_blocks * makespan) if makespan > 0 else 0.0 for r in ids]
        peak = max(recorder.kv_peak[r] for r in ids) / pool.num_blocks
        shares += share
        peaks.append(peak)
        figures[f"{name}_num_replicas"] = pool.num_replicas
        figures[f"{name}_num_blocks"] = pool.num_blocks
        figures[f"{name}_kv_utilization_mean"] = float(np.mean(share))
        figures[f"{name}_kv_utilization_peak"] = peak
        if recorder.keeps_batches and makespan > 0:
            figures[f"{name}_busy_fraction"] = _busy(stages, ids) / (
                len(ids) * pool.pipeline_parallel_size * makespan)
            figures[f"{name}_queue_mean"] = _mean_waiting(series, ids, start, start + makespan)
    figures["kv_utilization_mean"] = float(np.mean(shares))
    figures["kv_utilization_peak"] = max(peaks)
    return figures


def _busy(stages: pd.DataFrame, ids: list[int]) -> float:
    mine = stages[stages["replica_id"].isin(ids)]
    return float((mine["end"] - mine["start"]).sum())


def _mean_waiting(series: pd.DataFrame, ids: list[int], start: float, end: float) -> float:
    """Time-weighted mean over [start, end] of the waiting queue, averaged over the replicas."""
    means = []
    for replica in ids:
        mine = series[series["replica_id"] == replica]
        times = np.clip(mine["time"].to_numpy(), start, end)
        spans = np.diff(np.append(times, end))
        means.append(dot(mine["num_waiting"].to_numpy(), spans) / (end - start))
    return float(np.mean(means))


def transfer_figures(transfers: pd.DataFrame) -> dict:
    """How many KV transfers, how long they took on the link, and how long requests waited between
    the end of their prefill and the start of their transfer (for decode room and the link)."""
    figures: dict[str, float] = {"num_transfers": len(transfers)}
    took = (transfers["end"] - transfers["start"]).to_numpy()
    waited = (transfers["start"] - transfers["handed_off_at"]).to_numpy()
    for name, values in (("transfer_time", took), ("transfer_wait", waited)):
        for p, value in zip((50, 99), quantiles(values, (50, 99))):
            figures[f"{name}_p{p}_s"] = value
    return figures
