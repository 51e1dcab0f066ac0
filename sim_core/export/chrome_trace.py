"""Chrome trace (Perfetto / chrome://tracing) of a run.

Mapping: one process per replica (pid = replica id), one thread per pipeline stage
(tid = stage id), each batch stage a complete event (`ph: X`, microseconds) whose args list the
request ids and tokens; counter tracks (`ph: C`) per replica for KV blocks in use and queue
lengths. With P/D disaggregation processes are named by pool ("Prefill replica 0") and each
prefill replica has one more thread, its KV link (tid = its number of stages), whose complete
events are the KV transfers it sent (category `kv_transfer`). vllm_v0's KV swaps and copies are
complete events on their own thread per stage (tid = KV_COPY_TID + stage, "Stage s KV copies"),
at the start of the batch's stage. Each request has its own track under a "Requests" process,
with arrows to the batches that ran its prompt (`export/request_tracks.py`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sim_core.export.record_level import check_writable
from sim_core.export.request_tracks import request_track_events
from sim_core.results.cache_ops import cache_op_spans

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

US = 1e6
KV_COPY_TID = 1000


def chrome_trace(result: SimulationResult) -> dict:
    """The trace as a JSON-serializable dict {"traceEvents": [...], "displayTimeUnit": "ms"};
    ConfigError for a run recorded at `engine.record: series` (record_level.py)."""
    check_writable(result.config.engine.record)
    events = (metadata_events(result) + _stage_events(result) + _transfer_events(result) + _cache_op_events(result)
              + _counter_events(result) + request_track_events(result))
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"scenario": result.config.name or "", "num_blocks": result.num_blocks}}


def trace_file_name(scenario_name: str | None) -> str:
    """A download name for the trace of a scenario: its name as letters, digits and "-", at most
    80 of them, then ".trace.json" ("chrome_trace.json" for an unnamed scenario)."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", scenario_name or "").strip("-")[:80].rstrip("-")
    return f"{slug}.trace.json" if slug else "chrome_trace.json"


def metadata_events(result: SimulationResult) -> list[dict]:
    """Names and sort order of each replica's process and threads."""
    events, pooled = [], bool(result.pools)
    senders = set(result.transfers["source_replica"].tolist()) if len(result.transfers) else set()
    for replica in result.replicas:
        pid, stages = replica.id, replica.pipeline_parallel_size
        events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                       "args": {"name": f"{replica.pool.capitalize()} replica {pid}"
                                if pooled else f"Replica {pid}"}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                       "args": {"sort_index": pid}})
        for stage in range(stages):
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": stage,
                           "args": {"name": f"Stage {stage}"}})
        if pid in senders:
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": stages,
                           "args": {"name": "KV link"}})
    return events


def _transfer_events(result: SimulationResult) -> list[dict]:
    transfers, replicas = result.transfers, result.replicas
    if not len(transfers):
        return []
    return [{"name": f"KV request {rid}", "cat": "kv_transfer", "ph": "X", "ts": start * US,
             "dur": (end - start) * US, "pid": source, "tid": replicas[source].pipeline_parallel_size,
             "args": {"request_id": rid, "num_bytes": num_bytes, "num_tokens": tokens,
                      "to": replicas[target].name}}
            for rid, source, target, tokens, num_bytes, start, end in zip(
                transfers["request_id"].tolist(), transfers["source_replica"].tolist(),
                transfers["target_replica"].tolist(), transfers["num_tokens"].tolist(),
                transfers["num_bytes"].tolist(), transfers["start"].tolist(), transfers["end"].tolist())]


def _stage_events(result: SimulationResult) -> list[dict]:
    stages, batches = result.batch_stages, result.batches
    if not len(stages) or not len(batches):
        return []
    keys = list(zip(batches["replica_id"].tolist(), batches["batch_id"].tolist()))
    ids = dict(zip(keys, batches["request_ids"]))
    tokens = dict(zip(keys, batches["request_tokens"]))
    prefill = dict(zip(keys, batches["num_prefill_tokens"].tolist()))
    padded = dict(zip(keys, batches["padded_size"].tolist()))
    events = []
    for batch, replica, stage, start, end in zip(stages["batch_id"].tolist(), stages["replica_id"].tolist(),
                                                stages["stage_id"].tolist(), stages["start"].tolist(),
                                                stages["end"].tolist()):
        key = (replica, batch)
        events.append({
            "name": f"batch {batch} ({len(ids[key])} req)", "cat": "batch", "ph": "X",
            "ts": start * US, "dur": (end - start) * US, "pid": replica, "tid": stage,
            "args": {"batch_id": batch, "num_tokens": sum(tokens[key]), "num_prefill_tokens": prefill[key],
                     "request_ids": list(ids[key]), "request_tokens": list(tokens[key]),
                     "padded_size": padded[key]}})
    return events


def _cache_op_events(result: SimulationResult) -> list[dict]:
    spans = cache_op_spans(result.cache_ops, result.batch_stages)
    events, lanes = [], set()
    for replica, stage, batch, request, kind, blocks, start, end in zip(
            spans["replica_id"].tolist(), spans["stage_id"].tolist(), spans["batch_id"].tolist(),
            spans["request_id"].tolist(), spans["kind"].astype(str).tolist(), spans["num_blocks"].tolist(),
            spans["start"].tolist(), spans["end"].tolist()):
        lanes.add((replica, stage))
        events.append({"name": f"{kind} {blocks} blocks (request {request})", "cat": "kv_copy", "ph": "X",
                       "ts": start * US, "dur": (end - start) * US, "pid": replica, "tid": KV_COPY_TID + stage,
                       "args": {"batch_id": batch, "request_id": request, "kind": kind, "num_blocks": blocks}})
    return kv_copy_lane_events(lanes) + events


def kv_copy_lane_events(lanes: set[tuple[int, int]]) -> list[dict]:
    """The names of the KV-copy threads of these (replica, stage) lanes, in lane order."""
    return [{"name": "thread_name", "ph": "M", "pid": replica, "tid": KV_COPY_TID + stage,
             "args": {"name": f"Stage {stage} KV copies"}} for replica, stage in sorted(lanes)]


def _counter_events(result: SimulationResult) -> list[dict]:
    series, events, blocks = result.timeseries, [], [replica.num_blocks for replica in result.replicas]
    for time, replica, used, waiting, running in zip(series["time"].tolist(), series["replica_id"].tolist(),
                                                     series["kv_blocks_used"].tolist(),
                                                     series["num_waiting"].tolist(), series["num_running"].tolist()):
        events.append({"name": "KV blocks", "ph": "C", "ts": time * US, "pid": replica,
                       "args": {"used": used, "free": blocks[replica] - used}})
        events.append({"name": "Requests", "ph": "C", "ts": time * US, "pid": replica,
                       "args": {"waiting": waiting, "running": running}})
    return events
