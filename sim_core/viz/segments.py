"""Request lifecycles as time segments: waiting, prefill chunks, decode, preempted, finished.

Built from a run recorded with `record: full` (state changes) and its batch table. A batch
entry of a request is a prefill chunk when it carries more than one token or is the first entry
after the request was admitted; otherwise it is a decode step (decode steps are drawn as one
segment from the end of the prefill to the next restart or the finish). A 1-token prefill chunk
that is not the first of its period is drawn as decode: the only approximation here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

ENDINGS = ("restarted", "finished", "rejected")
KIND_COLORS = {"waiting": "#c7c7c7", "prefill": "#f28e2b", "decode": "#4e79a7", "preempted": "#e15759"}


def prefill_entries(batches: pd.DataFrame, request_ids: np.ndarray) -> pd.DataFrame:
    """(request, start, end, tokens) of every batch entry of the given requests in batches that
    carry prompt tokens, in batch order. Decode-only batches are skipped without expanding them."""
    carrying = batches[batches["num_prefill_tokens"] > 0]
    if not len(carrying):
        return pd.DataFrame({"request": [], "start": [], "end": [], "tokens": []})
    counts = carrying["num_requests"].to_numpy()
    ids = np.fromiter((i for ids in carrying["request_ids"] for i in ids), dtype=np.int64, count=int(counts.sum()))
    tokens = np.fromiter((t for ts in carrying["request_tokens"] for t in ts), dtype=np.int64, count=len(ids))
    keep = np.isin(ids, request_ids)
    return pd.DataFrame({"request": ids[keep], "start": np.repeat(carrying["formed_at"].to_numpy(), counts)[keep],
                         "end": np.repeat(carrying["completed_at"].to_numpy(), counts)[keep],
                         "tokens": tokens[keep]})


def request_segments(result: SimulationResult, request_ids: np.ndarray) -> pd.DataFrame:
    """Segments (request, kind, start, end) of the given requests, ordered by request then time."""
    request_ids = np.asarray(request_ids, dtype=np.int64)
    states = result.state_events
    states = states[states["request"].isin(request_ids)]
    entries = prefill_entries(result.batches, request_ids)
    # numpy slices per request (state names as str once): no DataFrame per request
    by_request_states = _by_request(states["request"].to_numpy(), states["time"].to_numpy(),
                                    states["state"].astype(str).to_numpy())
    by_request_entries = _by_request(*(entries[c].to_numpy() for c in ("request", "start", "end", "tokens")))
    arrived = result.requests["arrived_at"].to_numpy()
    rows: list[tuple] = []
    empty = (np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64))
    for r in request_ids:
        events = by_request_states.get(int(r))
        if events is None:
            continue
        _lifecycle(rows, int(r), float(arrived[r]), events, by_request_entries.get(int(r), empty))
    return pd.DataFrame(rows, columns=["request", "kind", "start", "end"])


def _by_request(requests: np.ndarray, *columns: np.ndarray) -> dict[int, tuple[np.ndarray, ...]]:
    """Request id -> its rows of `columns`, in their order in the table."""
    order = np.argsort(requests, kind="stable")
    ids = requests[order]
    bounds = np.flatnonzero(np.diff(ids)) + 1
    starts, ends = np.concatenate([[0], bounds]), np.concatenate([bounds, [len(ids)]])
    ordered = [column[order] for column in columns]
    return {int(ids[a]): tuple(column[a:b] for column in ordered) for a, b in zip(starts, ends) if b > a}


def _lifecycle(rows: list, request: int, arrived: float, events: tuple[np.ndarray, ...],
               entries: tuple[np.ndarray, ...]) -> None:
    """Append one request's segments: a waiting or preempted gap before each admission, then its
    prefill chunks and decode until the next restart or the finish. `events`: its state
    changes (times, names); `entries`: its prompt-carrying batch entries (starts, ends, tokens)."""
    times, names = events
    entry_start, entry_end, entry_tokens = entries
    gap_start, gap_kind = arrived, "waiting"
    for i, name in enumerate(names):
        if name != "admitted":
            continue
        _add(rows, request, gap_kind, gap_start, times[i])
        end = next((j for j in range(i + 1, len(names)) if names[j] in ENDINGS), None)
        stop, stop_name = (np.nan, "") if end is None else (times[end], names[end])
        inside = (entry_start >= times[i]) & ((entry_start < stop) | np.isnan(stop))
        first = np.argmax(inside) if inside.any() else -1
        chunk = inside & ((entry_tokens > 1) | (np.arange(len(inside)) == first))
        for s, e in zip(entry_start[chunk], entry_end[chunk]):
            _add(rows, request, "prefill", s, e)
        if chunk.any() and not np.isnan(stop):
            _add(rows, request, "decode", entry_end[chunk].max(), stop)
        gap_start, gap_kind = stop, "preempted"
        if stop_name != "restarted":
            return
    if gap_kind == "waiting" or not np.isnan(gap_start):
        last = times[-1] if len(times) else gap_start
        _add(rows, request, gap_kind, gap_start, last)


def _add(rows: list, request: int, kind: str, start: float, end: float) -> None:
    if end > start:
        rows.append((request, kind, float(start), float(end)))
