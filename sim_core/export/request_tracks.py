"""Request tracks of the Chrome trace: one thread per request under a "Requests" process, so a
request can be followed in Perfetto.

Each request's thread (tid = request id, named "request #N") holds a complete event spanning
its life (arrival to completion, or to its last recorded time) and, nested in it, its phases:
`waiting` (arrival to first admission), `prefill` (admission to the first token), `decode` (to
completion), `preempted` (a restart to the next admission, when the run recorded state events:
`record: full`) and `transfer` (a P/D KV hand-off). Complete events on threads rather than async
events because flow arrows bind to thread slices: each batch that carried prompt tokens of the
request gets an arrow (`ph: s` on the request's thread, `ph: f`, `bp: e` on the batch's first
stage), so Perfetto leads from a request to the batches that ran its prompt.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

US = 1e6
REQUESTS_PID = 1_000_000          # after every replica's pid (replica ids are small)


def request_track_events(result: SimulationResult) -> list[dict]:
    """Metadata, phase slices and flow arrows of every request that arrived."""
    requests = result.requests
    if not len(requests):
        return []
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": REQUESTS_PID, "tid": 0, "args": {"name": "Requests"}},
        {"name": "process_sort_index", "ph": "M", "pid": REQUESTS_PID, "tid": 0,
         "args": {"sort_index": REQUESTS_PID}}]
    restarts = _restart_spans(result)
    transfers = _transfer_spans(result)
    for row in zip(requests["request_id"].tolist(), requests["arrived_at"].tolist(),
                   requests["scheduled_at"].tolist(), requests["prefill_completed_at"].tolist(),
                   requests["completed_at"].tolist(), requests["replica_id"].tolist(),
                   requests["num_prefill_tokens"].tolist(), requests["num_decode_tokens"].tolist(),
                   requests["status"].astype(str).tolist()):
        events.extend(_request_events(row, restarts.get(row[0], []), transfers.get(row[0], [])))
    return events + _flows(result)


def _known(value: float) -> bool:
    return value is not None and not math.isnan(value) and value >= 0


def _request_events(row: tuple, preempted: list[tuple[float, float]],
                    transfers: list[tuple[float, float]]) -> list[dict]:
    """`row`: (id, arrived, scheduled, first token, completed, replica, prompt, output, status)."""
    request, arrived, scheduled, first_token, completed, replica, prompt, output, status = row
    if not _known(arrived):
        return []
    times = [t for t in (arrived, scheduled, first_token, completed) if _known(t)]
    end = completed if _known(completed) else max(times + [e for _, e in preempted + transfers])
    events = [{"name": "thread_name", "ph": "M", "pid": REQUESTS_PID, "tid": request,
               "args": {"name": f"request #{request}"}},
              _slice(request, f"request #{request}", "request", arrived, end,
                     {"replica": replica, "prompt_tokens": prompt, "output_tokens": output, "status": status})]
    phases = [("waiting", arrived, scheduled), ("prefill", scheduled, first_token), ("decode", first_token, completed)]
    for name, start, stop in phases:
        if _known(start) and _known(stop) and stop > start:
            events.append(_slice(request, name, "request_phase", start, stop))
    for kind, spans in (("preempted", preempted), ("transfer", transfers)):
        events.extend(_slice(request, kind, "request_phase", start, stop) for start, stop in spans if stop > start)
    return events


def _slice(request: int, name: str, category: str, start: float, end: float, args: dict | None = None) -> dict:
    event = {"name": name, "cat": category, "ph": "X", "ts": start * US, "dur": (end - start) * US,
             "pid": REQUESTS_PID, "tid": request}
    if args is not None:
        event["args"] = args
    return event


def _restart_spans(result: SimulationResult) -> dict[int, list[tuple[float, float]]]:
    """Per request, (restart, next admission) times from the state events (none without them)."""
    states = result.state_events
    spans: dict[int, list[tuple[float, float]]] = {}
    if not len(states):
        return spans
    pending: dict[int, float] = {}
    for time, request, state in zip(states["time"].tolist(), states["request"].tolist(),
                                    states["state"].astype(str).tolist()):
        if state == "restarted":
            pending[request] = time
        elif state == "admitted" and request in pending:
            spans.setdefault(request, []).append((pending.pop(request), time))
    return spans


def _transfer_spans(result: SimulationResult) -> dict[int, list[tuple[float, float]]]:
    transfers = result.transfers
    spans: dict[int, list[tuple[float, float]]] = {}
    if len(transfers):
        for request, start, end in zip(transfers["request_id"].tolist(), transfers["start"].tolist(),
                                       transfers["end"].tolist()):
            spans.setdefault(request, []).append((start, end))
    return spans


def _flows(result: SimulationResult) -> list[dict]:
    """An arrow from each request to every batch that carried its prompt tokens (first stage)."""
    batches, stages = result.batches, result.batch_stages
    if not len(batches) or not len(stages):
        return []
    first = stages[stages["stage_id"] == 0]
    starts = dict(zip(zip(first["replica_id"].tolist(), first["batch_id"].tolist()), first["start"].tolist()))
    carrying = batches[batches["num_prefill_tokens"] > 0]
    events, flow = [], 0
    for replica, batch, formed, ids, tokens in zip(carrying["replica_id"].tolist(), carrying["batch_id"].tolist(),
                                                   carrying["formed_at"].tolist(), carrying["request_ids"],
                                                   carrying["request_tokens"]):
        start = starts.get((replica, batch))
        if start is None:
            continue
        for request, count in zip(np.asarray(ids).tolist(), np.asarray(tokens).tolist()):
            if count <= 1:              # a decode step riding in a batch with prompts
                continue
            events.append({"name": "carried by", "cat": "request_flow", "ph": "s", "id": flow, "ts": formed * US,
                           "pid": REQUESTS_PID, "tid": request})
            events.append({"name": "carried by", "cat": "request_flow", "ph": "f", "bp": "e", "id": flow,
                           "ts": start * US, "pid": replica, "tid": 0})
            flow += 1
    return events
