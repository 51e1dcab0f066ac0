"""Chrome trace (Perfetto / chrome://tracing) of a run.

Mapping: one process per replica (pid = replica id), one thread per pipeline stage
(tid = stage id), each batch stage a complete event (`ph: X`, microseconds) whose args list the
request ids and tokens; counter tracks (`ph: C`) per replica for KV blocks in use and queue
lengths. vllm_v0's KV swaps and copies are complete events on their own thread per stage
(tid = KV_COPY_TID + stage, "Stage s KV copies"), at the start of the batch's stage.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from sim_core.memory.cache_ops import cache_op_spans

US = 1e6
KV_COPY_TID = 1000


def chrome_trace(result) -> dict:
    """The trace as a JSON-serializable dict {"traceEvents": [...], "displayTimeUnit": "ms"}."""
    events = _metadata(result) + _stage_events(result) + _cache_op_events(result) + _counter_events(result)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"scenario": result.config.name or "", "num_blocks": result.num_blocks}}


def write_chrome_trace(result, path: str | Path) -> None:
    Path(path).write_text(json.dumps(chrome_trace(result), separators=(",", ":")))


def _metadata(result) -> list[dict]:
    cluster, events = result.config.cluster, []
    for replica in range(cluster.num_replicas):
        events.append({"name": "process_name", "ph": "M", "pid": replica, "tid": 0,
                       "args": {"name": f"Replica {replica}"}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": replica, "tid": 0,
                       "args": {"sort_index": replica}})
        for stage in range(cluster.pipeline_parallel_size):
            events.append({"name": "thread_name", "ph": "M", "pid": replica, "tid": stage,
                           "args": {"name": f"Stage {stage}"}})
    return events


def _stage_events(result) -> list[dict]:
    stages, batches = result.batch_stages, result.batches
    if not len(stages) or not len(batches):
        return []
    keys = list(zip(batches["replica_id"].tolist(), batches["batch_id"].tolist()))
    ids = dict(zip(keys, batches["request_ids"]))
    tokens = dict(zip(keys, batches["request_tokens"]))
    prefill = dict(zip(keys, batches["num_prefill_tokens"].tolist()))
    events = []
    for batch, replica, stage, start, end in zip(stages["batch_id"].tolist(), stages["replica_id"].tolist(),
                                                stages["stage_id"].tolist(), stages["start"].tolist(),
                                                stages["end"].tolist()):
        key = (replica, batch)
        events.append({
            "name": f"batch {batch} ({len(ids[key])} req)", "cat": "batch", "ph": "X",
            "ts": start * US, "dur": (end - start) * US, "pid": replica, "tid": stage,
            "args": {"batch_id": batch, "num_tokens": sum(tokens[key]), "num_prefill_tokens": prefill[key],
                     "request_ids": list(ids[key]), "request_tokens": list(tokens[key])}})
    return events


def _cache_op_events(result) -> list[dict]:
    spans = cache_op_spans(getattr(result, "cache_ops", pd.DataFrame()), result.batch_stages)
    events, lanes = [], set()
    for replica, stage, batch, request, kind, blocks, start, end in zip(
            spans["replica_id"].tolist(), spans["stage_id"].tolist(), spans["batch_id"].tolist(),
            spans["request_id"].tolist(), spans["kind"].astype(str).tolist(), spans["num_blocks"].tolist(),
            spans["start"].tolist(), spans["end"].tolist()):
        lanes.add((replica, stage))
        events.append({"name": f"{kind} {blocks} blocks (request {request})", "cat": "kv_copy", "ph": "X",
                       "ts": start * US, "dur": (end - start) * US, "pid": replica, "tid": KV_COPY_TID + stage,
                       "args": {"batch_id": batch, "request_id": request, "kind": kind, "num_blocks": blocks}})
    names = [{"name": "thread_name", "ph": "M", "pid": replica, "tid": KV_COPY_TID + stage,
              "args": {"name": f"Stage {stage} KV copies"}} for replica, stage in sorted(lanes)]
    return names + events


def _counter_events(result) -> list[dict]:
    series, events = result.timeseries, []
    for time, replica, used, waiting, running in zip(series["time"].tolist(), series["replica_id"].tolist(),
                                                     series["kv_blocks_used"].tolist(),
                                                     series["num_waiting"].tolist(), series["num_running"].tolist()):
        events.append({"name": "KV blocks", "ph": "C", "ts": time * US, "pid": replica,
                       "args": {"used": used, "free": result.num_blocks - used}})
        events.append({"name": "Requests", "ph": "C", "ts": time * US, "pid": replica,
                       "args": {"waiting": waiting, "running": running}})
    return events
