"""Per-pool figures of a P/D-disaggregated run: KV use, busy share and queue per pool, and the
KV transfers between them (added to the run's summary under `prefill_...`, `decode_...`,
`transfer_...`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim_core.memory import MemoryPlan
from sim_core.results.metrics import quantiles

if TYPE_CHECKING:
    from sim_core.cluster.pools import PoolView
    from sim_core.engine.simulator import Simulator
    from sim_core.results.record import Recorder
    from sim_core.results.result import SimulationResult
    from sim_core.schedulers import ReplicaLimits


@dataclass(frozen=True)
class PoolInfo:
    """One pool of a disaggregated run, as the result describes it."""

    name: str
    first_replica: int
    num_replicas: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    num_blocks: int
    memory_plan: MemoryPlan | None

    @property
    def replica_ids(self) -> range:
        return range(self.first_replica, self.first_replica + self.num_replicas)


def blocks_per_replica(result: SimulationResult) -> list[int]:
    """KV blocks of each replica (pools may differ; without pools all have `num_blocks`)."""
    if not result.pools:
        return [result.num_blocks] * result.config.cluster.num_replicas
    return [pool.num_blocks for pool in result.pools for _ in pool.replica_ids]


def add_pools(result: SimulationResult, sized: list[tuple[PoolView, MemoryPlan | None, ReplicaLimits]],
              simulator: Simulator, recorder: Recorder) -> SimulationResult:
    """The result with its pools, transfer table and per-pool summary figures. The headline KV
    utilization becomes the mean (and peak) over replicas of each replica's own share, and
    `num_blocks` the largest pool's (views size their block grids by it)."""
    pools = [PoolInfo(view.name, view.first_replica, view.num_replicas, view.config.cluster.tensor_parallel_size,
                      view.config.cluster.pipeline_parallel_size, limits.num_blocks, plan)
             for view, plan, limits in sized]
    assert simulator.handoff is not None, "pools come with a disaggregated run"
    arrays = simulator.handoff.table()
    order = np.lexsort((arrays["request_id"], arrays["start"]))
    transfers = pd.DataFrame({name: values[order] for name, values in arrays.items()})
    summary = dict(result.summary)
    summary.update(pool_figures(pools, recorder, result, summary["makespan_s"]))
    summary.update(transfer_figures(transfers))
    return dataclasses.replace(result, pools=pools, transfers=transfers, summary=summary,
                               num_blocks=max(p.num_blocks for p in pools))


def pool_figures(pools: list[PoolInfo], recorder: Recorder, result: SimulationResult, makespan: float) -> dict:
    """KV utilization (mean, peak), busy share of the stages and mean waiting queue per pool."""
    figures: dict[str, float] = {}
    shares: list[float] = []
    peaks: list[float] = []
    start = float(result.requests["arrived_at"].min()) if len(result.requests) else 0.0
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
            figures[f"{name}_busy_fraction"] = _busy(result.batch_stages, ids) / (
                len(ids) * pool.pipeline_parallel_size * makespan)
            figures[f"{name}_queue_mean"] = _mean_waiting(result.timeseries, ids, start, start + makespan)
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
        means.append(float(np.dot(mine["num_waiting"].to_numpy(), spans)) / (end - start))
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
