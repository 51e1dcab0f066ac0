"""Request tracks of the Chrome trace: one thread per request under a "Requests" process, so a
request can be followed in Perfetto.

Each request's thread (tid = request id, named "request #N") holds a complete event spanning
its life (arrival to completion, or to its last recorded time) and, nested in it, its phases:
`waiting` (arrival to first admission), `prefill` (admission to the first token), `decode` (to
completion), `preempted` (a restart to the next admission) and `swapped` (vLLM v0: a swap-out to
the swap-in), both when the run recorded state events (`record: full`), and `transfer` (a P/D KV
hand-off). Each slice lies inside the one it is drawn in (Perfetto drops slices of a thread that
overlap without nesting; `tests/test_request_tracks.py` checks a 10,000-request trace).

Complete events on threads rather than async events because flow arrows bind to thread slices:
each batch that carried prompt tokens of the request gets an arrow (`ph: s` on the request's
thread, `ph: f`, `bp: e` on the batch's first stage), and so do the first and the last batch that
carried one of its decode steps (an arrow per decode step would put hundreds per request in the
file), so Perfetto leads from a request to the batches that ran its prompt and its decode.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from sim_core.export.batch_lists import BatchLists

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

US = 1e6
REQUESTS_PID = 1_000_000          # after every replica's pid (replica ids are small)


def request_track_events(result: SimulationResult) -> list[dict]:
    """Metadata, phase slices and flow arrows of every request that arrived."""
    requests = result.requests
    if not len(requests):
        return []
    events = track_header_events()
    paused = paused_spans(result)
    transfers = _transfer_spans(result)
    for row in zip(requests["request_id"].tolist(), requests["arrived_at"].tolist(),
                   requests["scheduled_at"].tolist(), requests["prefill_completed_at"].tolist(),
                   requests["completed_at"].tolist(), requests["replica_id"].tolist(),
                   requests["num_prefill_tokens"].tolist(), requests["num_decode_tokens"].tolist(),
                   requests["status"].astype(str).tolist()):
        events.extend(_request_events(row, paused.get(row[0], []), transfers.get(row[0], [])))
    return events + _flows(result)


def track_header_events() -> list[dict]:
    """The name and sort order of the "Requests" process."""
    return [{"name": "process_name", "ph": "M", "pid": REQUESTS_PID, "tid": 0, "args": {"name": "Requests"}},
            {"name": "process_sort_index", "ph": "M", "pid": REQUESTS_PID, "tid": 0,
             "args": {"sort_index": REQUESTS_PID}}]


def _known(value: float) -> bool:
    return value is not None and not math.isnan(value) and value >= 0


def _request_events(row: tuple, paused: list[tuple[str, float, float]],
                    transfers: list[tuple[float, float]]) -> list[dict]:
    """`row`: (id, arrived, scheduled, first token, completed, replica, prompt, output, status);
    `paused`: (preempted or swapped, from, to) spans."""
    request, arrived, scheduled, first_token, completed, replica, prompt, output, status = row
    if not _known(arrived):
        return []
    times = [t for t in (arrived, scheduled, first_token, completed) if _known(t)]
    end = completed if _known(completed) else max(times + [e for *_, e in paused] + [e for _, e in transfers])
    events = [{"name": "thread_name", "ph": "M", "pid": REQUESTS_PID, "tid": request,
               "args": {"name": f"request #{request}"}},
              _slice(request, f"request #{request}", "request", arrived, end,
                     {"replica": replica, "prompt_tokens": prompt, "output_tokens": output, "status": status})]
    phases = [("waiting", arrived, scheduled), ("prefill", scheduled, first_token), ("decode", first_token, completed)]
    for name, start, stop in phases:
        if _known(start) and _known(stop) and stop > start:
            events.append(_slice(request, name, "request_phase", start, stop))
    spans = [*paused, *(("transfer", start, stop) for start, stop in transfers)]
    events.extend(_slice(request, kind, "request_phase", start, stop) for kind, start, stop in spans if stop > start)
    return events


def _slice(request: int, name: str, category: str, start: float, end: float, args: dict | None = None) -> dict:
    event = {"name": name, "cat": category, "ph": "X", "ts": start * US, "dur": (end - start) * US,
             "pid": REQUESTS_PID, "tid": request}
    if args is not None:
        event["args"] = args
    return event


PAUSES = {"restarted": ("preempted", "admitted"), "swapped_out": ("swapped", "swapped_in")}


def paused_spans(result: SimulationResult) -> dict[int, list[tuple[str, float, float]]]:
    """Per request, (kind, from, to): a restart to the next admission (`preempted`), a swap-out
    to the swap-in (`swapped`), from the state events (none without them)."""
    states = result.state_events
    spans: dict[int, list[tuple[str, float, float]]] = {}
    if not len(states):
        return spans
    names = states["state"].astype(str)
    paused = states["request"][names.isin(list(PAUSES))].unique()
    ends = [end for _, end in PAUSES.values()]
    states = states[names.isin([*PAUSES, *ends]) & states["request"].isin(paused)]   # the events the loop reads
    pending: dict[tuple[int, str], float] = {}
    for time, request, state in zip(states["time"].tolist(), states["request"].tolist(),
                                    states["state"].astype(str).tolist()):
        if state in PAUSES:
            pending[(request, PAUSES[state][1])] = time
        elif (request, state) in pending:
            kind = next(name for name, end in PAUSES.values() if end == state)
            spans.setdefault(request, []).append((kind, pending.pop((request, state)), time))
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
    """An arrow from each request to every batch that carried its prompt tokens, and to the first
    and the last that carried one of its decode steps (first stage)."""
    batches, stages = result.batches, result.batch_stages
    if not len(batches) or not len(stages):
        return []
    first = stages[stages["stage_id"] == 0]
    starts = dict(zip(zip(first["replica_id"].tolist(), first["batch_id"].tolist()), first["start"].tolist()))
    replicas, ids, formed_at = (batches[name].tolist() for name in ("replica_id", "batch_id", "formed_at"))
    events: list[dict] = []
    requests, rows = carried_pairs(BatchLists(batches))
    for flow, (request, row) in enumerate(zip(requests.tolist(), rows.tolist())):
        replica, batch, formed = replicas[row], ids[row], formed_at[row]
        start = starts.get((replica, batch))
        if start is None:
            continue
        events.append({"name": "carried by", "cat": "request_flow", "ph": "s", "id": flow, "ts": formed * US,
                       "pid": REQUESTS_PID, "tid": request})
        events.append({"name": "carried by", "cat": "request_flow", "ph": "f", "bp": "e", "id": flow,
                       "ts": start * US, "pid": replica, "tid": 0})
    return events


def carried_pairs(lists: BatchLists) -> tuple[np.ndarray, np.ndarray]:
    """(request, batch row) pairs an arrow is drawn for, in batch order: every row where the
    request ran prompt tokens (more than one token), and its first and last decode step."""
    rows, ids = lists.ids.per_row()
    _, tokens = lists.tokens.per_row()
    decode = np.flatnonzero(tokens == 1)
    chosen = tokens != 1
    chosen[_first_and_last(ids[decode], decode)] = True
    picked = np.flatnonzero(chosen)
    return ids[picked], rows[picked]


def _first_and_last(keys: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The positions (increasing) of each key's first and last occurrence."""
    if not len(keys):
        return positions
    if keys.min() < 0 or keys.max() > 4 * len(keys):       # sparse keys: sort them
        _, first = np.unique(keys, return_index=True)
        _, last_reversed = np.unique(keys[::-1], return_index=True)
        return np.concatenate([positions[first], positions[len(keys) - 1 - last_reversed]])
    first = np.full(keys.max() + 1, positions[-1] + 1)
    last = np.full(keys.max() + 1, -1)
    np.minimum.at(first, keys, positions)
    np.maximum.at(last, keys, positions)
    return np.concatenate([first[last >= 0], last[last >= 0]])
