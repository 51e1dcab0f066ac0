"""What a run returns: tables, summary, records; built once at the end of the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim_core.cluster.pools import replica_stages
from sim_core.config import SimulationConfig
from sim_core.memory import MemoryPlan
from sim_core.memory.cache_ops import CACHE_OP_NAMES
from sim_core.predictor.accounting import operator_times
from sim_core.results.metrics import request_table, summarize
from sim_core.results.record import STATE_NAMES, Recorder, Table

if TYPE_CHECKING:
    from sim_core.engine.simulator import Simulator
    from sim_core.workload.model import Workload


@dataclass
class SimulationResult:
    """Everything a run produced.

    Attributes:
        requests: one row per request (request_id = arrival order) with times and latencies.
        batches: one row per batch (formation order) with its requests and token counts.
        batch_stages: one row per (batch, pipeline stage) execution with start and end.
        timeseries: KV blocks used and queue lengths per replica at every change.
        block_events: every block allocation (+1) and release (-1) with its physical id.
        state_events: request state changes (queued, admitted, restarted, finished, rejected).
        summary: headline figures (see `metrics.summarize`; per-pool figures with pools).
        operator_times: seconds of stage time per cost-model operator over the whole run, with
            its share (see `predictor.accounting`); empty at `engine.record: requests`.
        transfers: P/D disaggregation: one row per KV transfer (empty without pools).
        pools: P/D disaggregation: the prefill and decode pools (empty without pools).
        cache_ops: vllm_v0's KV swaps and copies, one row per (batch, request, kind) in the order
            they run before the batch's model (kind swap_in, swap_out or copy; seconds on each stage).
        block_refs: vllm_v0's reference counts of blocks shared by parallel samples (record: full).
    """

    config: SimulationConfig
    requests: pd.DataFrame
    batches: pd.DataFrame
    batch_stages: pd.DataFrame
    timeseries: pd.DataFrame
    block_events: pd.DataFrame
    state_events: pd.DataFrame
    summary: dict
    num_blocks: int
    memory_plan: MemoryPlan | None
    notes: list[str] = field(default_factory=list)
    operator_times: pd.DataFrame = field(default_factory=pd.DataFrame)
    transfers: pd.DataFrame = field(default_factory=pd.DataFrame)
    pools: list = field(default_factory=list)
    cache_ops: pd.DataFrame = field(default_factory=pd.DataFrame)
    block_refs: pd.DataFrame = field(default_factory=pd.DataFrame)


def build_result(config: SimulationConfig, workload: Workload, simulator: Simulator, recorder: Recorder,
                 rejected: dict[int, str], num_blocks: int, plan: MemoryPlan | None,
                 notes: list[str]) -> SimulationResult:
    requests = request_table(simulator.retire_all().rows(workload, rejected))
    end = float(np.nanmax(requests["completed_at"])) if requests["completed_at"].notna().any() else 0.0
    recorder.finish_kv(end)
    batches = _sorted(recorder.batches, ["formed_at", "replica_id", "batch_id"])
    stages = _sorted(recorder.stages, ["start", "replica_id", "stage_id", "batch_id"])
    batches["completed_at"] = _batch_ends(batches, stages, np.asarray(replica_stages(config)))
    recorder.compact_gaps(force=True)
    summary = summarize(requests, np.empty(0), recorder.gaps,
                        recorder.kv_area, recorder.kv_peak, num_blocks,
                        len(batches) if len(batches) else simulator_batches(simulator))
    cache_ops = _cache_op_frame(recorder)
    return SimulationResult(
        config=config, requests=requests, batches=batches, batch_stages=stages,
        timeseries=_sorted(recorder.series, ["time", "replica_id"]),
        block_events=_sorted(recorder.blocks, ["time", "replica"]),
        state_events=_state_frame(recorder), summary=summary, num_blocks=num_blocks,
        memory_plan=plan, notes=notes, cache_ops=cache_ops,
        block_refs=_sorted(recorder.block_refs, ["time", "replica"]),
        operator_times=operator_times(simulator.predictors, batches, stages, cache_ops,
                                      simulator.overlap.hidden_s if simulator.overlap is not None else 0.0))


def _sorted(table: Table, keys: list[str]) -> pd.DataFrame:
    """A recorded table as a DataFrame in canonical order (stable: ties keep the order in
    which they happened)."""
    arrays = table.arrays()
    order = np.lexsort([arrays[key] for key in reversed(keys)])
    return pd.DataFrame({name: values[order] for name, values in arrays.items()})


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


def simulator_batches(simulator: Simulator) -> int:
    return sum(scheduler.num_batches for scheduler in simulator.schedulers)


def _cache_op_frame(recorder: Recorder) -> pd.DataFrame:
    frame = _sorted(recorder.cache_ops, ["formed_at", "replica_id", "batch_id"])
    frame["kind"] = pd.Categorical.from_codes(frame["kind"].astype(int), categories=list(CACHE_OP_NAMES)) \
        if len(frame) else pd.Series([], dtype="object")
    return frame


def _state_frame(recorder: Recorder) -> pd.DataFrame:
    frame = _sorted(recorder.states, ["time", "replica"])
    frame["state"] = pd.Categorical.from_codes(frame["state"].astype(int), categories=list(STATE_NAMES)) \
        if len(frame) else pd.Series([], dtype="object")
    return frame
