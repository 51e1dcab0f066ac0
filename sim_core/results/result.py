"""What a run returns: tables, summary, records; built once at the end of the run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim_core.config import SimulationConfig
from sim_core.predictor.accounting import operator_times
from sim_core.results.cache_ops import cache_op_frame
from sim_core.results.kv_offload import offload_figures, offload_frame
from sim_core.results.metrics import request_table, summarize
from sim_core.results.pool_summary import pool_figures, transfer_figures, transfer_frame
from sim_core.results.record import STATE_NAMES, Recorder, Table
from sim_core.results.replicas import PoolInfo, ReplicaInfo, pools_of

if TYPE_CHECKING:
    from sim_core.predictor import Predictor
    from sim_core.results.request_log import RequestLog
    from sim_core.workload.model import Workload


@dataclass(frozen=True)
class SimulationResult:
    """Everything a run produced.

    Attributes:
        config: the scenario that ran.
        replicas: one record per replica in id order (`replicas[i].id == i`): its pool, TP, PP
            and KV blocks. Views draw the cluster from these (with P/D disaggregation the
            scenario's `cluster` section is not what ran).
        requests: one row per request (request_id = arrival order) with times and latencies.
        batches: one row per batch (formation order) with its requests and token counts (at
            `engine.record: series` only the columns of `record.BATCH_SUMMARY` and `completed_at`).
        batch_stages: one row per (batch, pipeline stage) execution with start and end.
        timeseries: KV blocks used and queue lengths per replica at every change.
        block_events: every block allocation (+1) and release (-1) with its physical id.
        state_events: request state changes (queued, admitted, restarted, finished, rejected).
        summary: headline figures (see `metrics.summarize`; per-pool figures with pools).
        notes: what the run wants a reader to know (requests rejected, workload changes...).
        operator_times: seconds of stage time per cost-model operator over the whole run, with
            its share (see `predictor.accounting`); empty at `engine.record` `requests` and `series`.
        transfers: P/D disaggregation: one row per KV transfer (empty without pools).
        cache_ops: vllm_v0's KV swaps and copies, one row per (batch, request, kind) in the order
            they run before the batch's model (kind swap_in, swap_out or copy; seconds on each stage).
        block_refs: vllm_v0's reference counts of blocks shared by parallel samples (record: full).
        kv_offload: vllm_v1's KV offload: blocks stored to / loaded from the CPU tier, one row
            per request and step or load (`results/kv_offload.py`; empty without offload).
    """

    config: SimulationConfig
    replicas: tuple[ReplicaInfo, ...]
    requests: pd.DataFrame
    batches: pd.DataFrame
    batch_stages: pd.DataFrame
    timeseries: pd.DataFrame
    block_events: pd.DataFrame
    state_events: pd.DataFrame
    summary: dict
    notes: list[str] = field(default_factory=list)
    operator_times: pd.DataFrame = field(default_factory=pd.DataFrame)
    transfers: pd.DataFrame = field(default_factory=pd.DataFrame)
    cache_ops: pd.DataFrame = field(default_factory=pd.DataFrame)
    block_refs: pd.DataFrame = field(default_factory=pd.DataFrame)
    kv_offload: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def num_blocks(self) -> int:
        """KV blocks per replica (the largest pool's with P/D: block grids are sized by it)."""
        return max(replica.num_blocks for replica in self.replicas)

    @property
    def pools(self) -> list[PoolInfo]:
        """P/D disaggregation: the prefill and decode pools (empty without pools)."""
        return pools_of(self.replicas)


def build_result(config: SimulationConfig, workload: Workload, replicas: Sequence[ReplicaInfo], recorder: Recorder,
                 log: RequestLog, rejected: dict[int, str], notes: list[str], *, num_batches: int,
                 predictors: Sequence[Predictor], overlap_hidden_s: float = 0.0,
                 transfers: dict[str, np.ndarray] | None = None) -> SimulationResult:
    """The result of a finished run, from what the engine recorded.

    Args:
        config: the scenario.
        workload: the requests (lengths and arrival times of those the log never saw).
        replicas: each replica as the engine built it, in id order.
        recorder: the run's records (mutated: its KV integrals are closed at the last completion
            and its token gaps compacted).
        log: every request's final figures (retired); `rejected`: reasons by request id.
        notes: the run's notes, as they are.
        num_batches: batches formed (counted by the schedulers: the recorder keeps no batch
            table at `engine.record: requests`).
        predictors: the cost model of each replica (prices the operator breakdown).
        overlap_hidden_s: CPU seconds overlap scheduling hid (sglang).
        transfers: P/D disaggregation: the KV transfers as columns (None without pools).
    """
    replicas = tuple(replicas)
    assert [replica.id for replica in replicas] == list(range(len(replicas))), "replica ids are positions"
    requests = request_table(log.rows(workload, rejected), config.scheduler.client_latency_s())
    end = float(np.nanmax(requests["completed_at"])) if requests["completed_at"].notna().any() else 0.0
    recorder.finish_kv(end)
    batches = _sorted(recorder.batches, ["formed_at", "replica_id", "batch_id"])
    stages = _sorted(recorder.stages, ["start", "replica_id", "stage_id", "batch_id"])
    batches["completed_at"] = _batch_ends(batches, stages, np.asarray([r.pipeline_parallel_size for r in replicas]))
    recorder.compact_gaps(force=True)
    summary = summarize(requests, recorder.gaps, recorder.kv_area, recorder.kv_peak, replicas[0].num_blocks,
                        len(batches) if len(batches) else num_batches)
    cache_ops = cache_op_frame(_sorted(recorder.cache_ops, ["formed_at", "replica_id", "batch_id"]))
    timeseries = _sorted(recorder.series, ["time", "replica_id"])
    pools, transfer_table = pools_of(replicas), pd.DataFrame()
    if pools:   # P/D disaggregation
        assert transfers is not None, "pools come with their transfers"
        transfer_table = transfer_frame(transfers)
        summary.update(pool_figures(pools, recorder, requests, stages, timeseries, summary["makespan_s"]))
        summary.update(transfer_figures(transfer_table))
    offload = pd.DataFrame()
    if any(replica.num_offload_blocks for replica in replicas):
        offload = offload_frame(recorder.offload.drain())
        summary.update(offload_figures(offload, replicas[0].block_size))
    return SimulationResult(
        config=config, replicas=replicas, requests=requests, batches=batches, batch_stages=stages,
        timeseries=timeseries, block_events=_sorted(recorder.blocks, ["time", "replica"]),
        state_events=_state_frame(recorder), summary=summary, notes=notes, transfers=transfer_table,
        cache_ops=cache_ops, block_refs=_sorted(recorder.block_refs, ["time", "replica"]), kv_offload=offload,
        operator_times=operator_times(predictors, batches if recorder.keeps_batch_detail else batches.iloc[:0], stages,
                                      cache_ops, overlap_hidden_s))


def _sorted(table: Table, keys: list[str]) -> pd.DataFrame:
    """A recorded table as a DataFrame in canonical order (stable: ties keep the order in
    which they happened); the table is emptied (`Table.drain`)."""
    arrays = table.drain()
    order = np.lexsort([arrays[key] for key in reversed(keys)])
    # the sorted columns are new arrays nobody else holds: the frame takes them as they are
    # (pandas would copy them into consolidated blocks: 0.06 s for the 1.75 million block rows
    # of a 20,000-request `full` run)
    return pd.DataFrame({name: values[order] for name, values in arrays.items()}, copy=False)


def _batch_ends(batches: pd.DataFrame, stages: pd.DataFrame, num_stages: np.ndarray) -> np.ndarray:
    """When each batch left its last pipeline stage (NaN if it never did); `num_stages[r]` is
    replica r's pipeline depth."""
    last = stages[stages["stage_id"].to_numpy() == num_stages[stages["replica_id"].to_numpy()] - 1]
    width = int(max(batches["batch_id"].max() if len(batches) else 0, 0)) + 1
    stage_keys = last["replica_id"].to_numpy() * width + last["batch_id"].to_numpy()
    batch_keys = batches["replica_id"].to_numpy() * width + batches["batch_id"].to_numpy()
    order = np.argsort(stage_keys, kind="stable")
    found = np.searchsorted(stage_keys[order], batch_keys)
    found = np.minimum(found, max(len(order) - 1, 0))
    ends = np.full(len(batches), np.nan)
    if len(order):
        match = stage_keys[order][found] == batch_keys
        ends[match] = last["end"].to_numpy()[order][found[match]]
    return ends


def _state_frame(recorder: Recorder) -> pd.DataFrame:
    frame = _sorted(recorder.states, ["time", "replica", "late"]).drop(columns="late")
    frame["state"] = pd.Categorical.from_codes(frame["state"].astype(int), categories=list(STATE_NAMES)) \
        if len(frame) else pd.Series([], dtype="object")
    return frame
