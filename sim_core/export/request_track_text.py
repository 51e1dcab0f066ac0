"""The request tracks of the Chrome trace (`request_tracks.py` says what they show) as JSON text,
a column of requests at a time: per request its thread name, its life, its phases and its paused
and transfer spans, in the order `request_tracks.request_track_events` lists them; then the flow
arrows."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim_core.export.column_text import json_text
from sim_core.export.event_text import CHUNK_ROWS, concat, dumped, micros, row_lookup
from sim_core.export.request_tracks import REQUESTS_PID, carried_pairs, paused_spans, track_header_events

if TYPE_CHECKING:
    import pandas as pd

    from sim_core.export.batch_lists import BatchLists
    from sim_core.results.result import SimulationResult

PID = str(REQUESTS_PID)


@dataclass(frozen=True)
class Spans:
    """Paused and transfer spans of the requests, sorted by request row (a request's paused spans
    first, then its transfers, each in recorded order)."""

    row: np.ndarray
    name: np.ndarray       # str: preempted, swapped or transfer
    start: np.ndarray
    stop: np.ndarray


def request_track_arrays(result: SimulationResult, lists: BatchLists | None) -> Iterator[pa.Array]:
    """The "Requests" process: its names, each request's events, the flow arrows."""
    requests = result.requests
    if not len(requests):
        return
    yield dumped(track_header_events())
    spans = _spans(result, requests["request_id"].to_numpy())
    for start in range(0, len(requests), CHUNK_ROWS):
        yield _request_events(requests.iloc[start:start + CHUNK_ROWS], start, spans)
    if lists is not None and len(result.batch_stages):
        yield from _flow_events(result, lists)


def _known(times: np.ndarray) -> np.ndarray:
    return ~np.isnan(times) & (times >= 0)


def _request_events(requests: pd.DataFrame, first_row: int, spans: Spans) -> pa.Array:
    """Each request's events, each followed by a comma; null for a request that never arrived."""
    arrived, scheduled, first_token, completed = (requests[name].to_numpy(np.float64) for name in (
        "arrived_at", "scheduled_at", "prefill_completed_at", "completed_at"))
    arrives = _known(arrived)
    arrived = np.where(arrives, arrived, 0.0)
    inside = (spans.row >= first_row) & (spans.row < first_row + len(requests))
    rows, stops = spans.row[inside] - first_row, spans.stop[inside]
    latest = np.full(len(requests), -np.inf)
    np.fmax.at(latest, rows, stops)                 # NaN stops are passed over, as max() passes them
    for time in (scheduled, first_token):
        latest = np.where(_known(time), np.maximum(latest, time), latest)
    end = np.where(_known(completed), completed, np.maximum(latest, arrived))
    request = json_text(requests["request_id"])
    life = concat('{"name":"thread_name","ph":"M","pid":', PID, ',"tid":', request, ',"args":{"name":"request #',
                  request, '"}},{"name":"request #', request, '","cat":"request","ph":"X","ts":', micros(arrived),
                  ',"dur":', micros(end - arrived), ',"pid":', PID, ',"tid":', request, ',"args":{"replica":',
                  json_text(requests["replica_id"]), ',"prompt_tokens":', json_text(requests["num_prefill_tokens"]),
                  ',"output_tokens":', json_text(requests["num_decode_tokens"]), ',"status":',
                  json_text(requests["status"].astype(str)), "}}")
    phases = [_phase(name, request, begin, stop) for name, begin, stop in (
        ("waiting", arrived, scheduled), ("prefill", scheduled, first_token), ("decode", first_token, completed))]
    spanned = _span_events(spans, inside, first_row, request, len(requests))
    events = pc.binary_join_element_wise(life, *phases, spanned, "", ",", null_handling="skip")   # "": a last comma
    return pc.if_else(pa.array(arrives), events, pa.scalar(None, pa.string()))


def _phase(name: str, request: pa.Array, begin: np.ndarray, stop: np.ndarray) -> pa.Array:
    """The phase's slice where both ends are known and it lasts; null elsewhere."""
    with np.errstate(invalid="ignore"):
        lasts = _known(begin) & _known(stop) & (stop > begin)
    begin, stop = np.where(lasts, begin, 0.0), np.where(lasts, stop, 0.0)
    text = _slice(name, request, begin, stop)
    return pc.if_else(pa.array(lasts), text, pa.scalar(None, pa.string()))


def _slice(name: str | pa.Array, request: pa.Array, begin: np.ndarray, stop: np.ndarray) -> pa.Array:
    return concat('{"name":"', name, '","cat":"request_phase","ph":"X","ts":', micros(begin), ',"dur":',
                  micros(stop - begin), ',"pid":', PID, ',"tid":', request, "}")


def _span_events(spans: Spans, inside: np.ndarray, first_row: int, request: pa.Array, num_rows: int) -> pa.Array:
    """Per request of the chunk (rows first_row ...), its paused and transfer slices that last,
    joined by ","; null for a request with none."""
    lasts = inside & (spans.stop > spans.start)
    rows = spans.row[lasts] - first_row
    if not len(rows):
        return pa.nulls(num_rows, pa.string())
    texts = _slice(pa.array(spans.name[lasts].tolist(), pa.string()), request.take(pa.array(rows)),
                   spans.start[lasts], spans.stop[lasts])
    counts = np.bincount(rows, minlength=num_rows)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), texts, mask=pa.array(counts == 0)), ",")


def _spans(result: SimulationResult, request_ids: np.ndarray) -> Spans:
    """The paused spans (from the state events) and the P/D transfers of every request."""
    paused = [(request, order, kind, start, stop) for request, spans in paused_spans(result).items()
              for order, (kind, start, stop) in enumerate(spans)]
    transfers = result.transfers
    requests = [p[0] for p in paused] + (transfers["request_id"].tolist() if len(transfers) else [])
    names = [p[2] for p in paused] + ["transfer"] * len(transfers)
    starts = [p[3] for p in paused] + (transfers["start"].tolist() if len(transfers) else [])
    stops = [p[4] for p in paused] + (transfers["end"].tolist() if len(transfers) else [])
    ids = np.asarray(requests, dtype=np.int64)
    row = row_lookup((np.zeros(len(request_ids)), request_ids), (np.zeros(len(ids)), ids))
    found = row >= 0
    order = np.argsort(row[found], kind="stable")   # paused before transfers, each in its order
    pick = np.flatnonzero(found)[order]
    return Spans(row[pick], np.asarray(names, dtype=object)[pick], np.asarray(starts, dtype=np.float64)[pick],
                 np.asarray(stops, dtype=np.float64)[pick])


def _flow_events(result: SimulationResult, lists: BatchLists) -> Iterator[pa.Array]:
    """The arrows of `request_tracks._flows`: from a request's thread to a batch's first stage."""
    batches, stages = result.batches, result.batch_stages
    request, batch_row = carried_pairs(lists)
    first = stages[stages["stage_id"] == 0]
    replica = batches["replica_id"].to_numpy()[batch_row]
    stage_row = row_lookup((first["replica_id"].to_numpy(), first["batch_id"].to_numpy()),
                           (replica, batches["batch_id"].to_numpy()[batch_row]))
    flow = np.flatnonzero(stage_row >= 0)             # arrow ids count the pairs without a stage too
    formed, started = batches["formed_at"].to_numpy(np.float64), first["start"].to_numpy(np.float64)
    for start in range(0, len(flow), CHUNK_ROWS):
        pick = flow[start:start + CHUNK_ROWS]
        number = json_text(pick)
        yield concat('{"name":"carried by","cat":"request_flow","ph":"s","id":', number, ',"ts":',
                     micros(formed[batch_row[pick]]), ',"pid":', PID, ',"tid":', json_text(request[pick]),
                     '},{"name":"carried by","cat":"request_flow","ph":"f","bp":"e","id":', number, ',"ts":',
                     micros(started[stage_row[pick]]), ',"pid":', json_text(replica[pick]), ',"tid":0},')
