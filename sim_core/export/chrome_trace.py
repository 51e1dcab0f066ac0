"""Chrome trace (Perfetto / chrome://tracing) of a run.

Mapping: one process per replica (pid = replica id), one thread per pipeline stage
(tid = stage id), each batch stage a complete event (`ph: X`, microseconds) whose args list the
request ids and tokens; counter tracks (`ph: C`) per replica for KV blocks in use and queue
lengths.
"""

from __future__ import annotations

import json
from pathlib import Path

US = 1e6


def chrome_trace(result) -> dict:
    """The trace as a JSON-serializable dict {"traceEvents": [...], "displayTimeUnit": "ms"}."""
    events = _metadata(result) + _stage_events(result) + _counter_events(result)
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
