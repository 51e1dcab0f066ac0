"""The Chrome trace file, written fast: the same text as
`json.dumps(chrome_trace(result), separators=(",", ":"))`, byte for byte, built a column of
events at a time (`event_text.py`) and handed over in pieces so that the file is streamed to disk
and never held as one string. `chrome_trace.py` keeps the dict form (what the events mean, for
code that reads them); this module and `request_track_text.py` write the same events as text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim_core.export.atomic import atomic_open
from sim_core.export.batch_lists import BatchLists
from sim_core.export.chrome_trace import KV_COPY_TID, kv_copy_lane_events, metadata_events
from sim_core.export.column_text import json_text
from sim_core.export.event_text import CHUNK_ROWS, concat, dumped, event_bytes, micros, row_lookup
from sim_core.export.gzip_stream import gzipped
from sim_core.export.record_level import check_writable
from sim_core.export.request_track_text import request_track_arrays
from sim_core.results.cache_ops import cache_op_spans

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult


def chrome_trace_pieces(result: SimulationResult, lists: BatchLists | None = None) -> Iterator[bytes | memoryview]:
    """The trace's JSON text (UTF-8) in pieces, in order.

    Args:
        result: the run.
        lists: the batches' request lists, when the caller has built them already.

    Raises:
        ConfigError: the run was recorded at `engine.record: series` (record_level.py); raised
            here, before any piece is asked for (or a file opened for them).
    """
    check_writable(result.config.engine.record)
    return _pieces(result, lists)


def _pieces(result: SimulationResult, lists: BatchLists | None) -> Iterator[bytes | memoryview]:
    if lists is None:
        lists = BatchLists(result.batches) if len(result.batches) else None
    yield b'{"traceEvents":['
    last = memoryview(b",")                     # the events so far, each followed by a comma
    for events in _event_arrays(result, lists):
        text = event_bytes(events)
        if text.nbytes:
            if last.nbytes > 1:
                yield last
            last = text
    yield last[:-1]                             # the last event has no comma after it
    other = {"scenario": result.config.name or "", "num_blocks": result.num_blocks}
    yield f'],"displayTimeUnit":"ms","otherData":{json.dumps(other, separators=(",", ":"))}}}'.encode()


def chrome_trace_bytes(result: SimulationResult, gzip: bool = False) -> bytes:
    """The whole trace as one bytes object (for a download); gzip'd when `gzip` (the bytes
    `write_chrome_trace(gzip=True)` writes: Perfetto opens them as they are); ConfigError for a
    run recorded at `engine.record: series`, as chrome_trace_pieces."""
    pieces = chrome_trace_pieces(result)
    return b"".join(gzipped(pieces) if gzip else pieces)


def write_chrome_trace(result: SimulationResult, path: str | Path, gzip: bool = False) -> None:
    """Stream the trace (gzip'd when `gzip`) to `path`, whole or not at all (raises OutputError
    naming it); ConfigError for a run recorded at `engine.record: series`, before `path` is
    touched."""
    pieces = chrome_trace_pieces(result)
    with atomic_open(path, binary=True) as file:
        for piece in gzipped(pieces) if gzip else pieces:
            file.write(piece)


def _event_arrays(result: SimulationResult, lists: BatchLists | None) -> Iterator[pa.Array]:
    """The events in chrome_trace()'s order: metadata, batch stages, KV transfers, KV copies,
    counters, request tracks."""
    yield dumped(metadata_events(result))
    if lists is not None and len(result.batch_stages):
        yield from _stage_events(result, lists)
    yield from _transfer_events(result)
    yield from _cache_op_events(result)
    yield from _counter_events(result)
    yield from request_track_arrays(result, lists)


def _stage_events(result: SimulationResult, lists: BatchLists) -> Iterator[pa.Array]:
    stages, batches = result.batch_stages, result.batches
    row = row_lookup((batches["replica_id"].to_numpy(), batches["batch_id"].to_numpy()),
                     (stages["replica_id"].to_numpy(), stages["batch_id"].to_numpy()))
    if (row < 0).any():
        raise KeyError("a batch stage whose batch is not in the batches table")
    for start in range(0, len(stages), CHUNK_ROWS):
        part, rows = stages.iloc[start:start + CHUNK_ROWS], row[start:start + CHUNK_ROWS]
        batch = json_text(part["batch_id"])
        begin, end = part["start"].to_numpy(np.float64), part["end"].to_numpy(np.float64)
        yield concat('{"name":"batch ', batch, " (", json_text(lists.ids.lengths[rows]), ' req)","cat":"batch",'
                     '"ph":"X","ts":', micros(begin), ',"dur":', micros(end - begin), ',"pid":',
                     json_text(part["replica_id"]), ',"tid":', json_text(part["stage_id"]), ',"args":{"batch_id":',
                     batch, ',"num_tokens":', json_text(lists.tokens.sums[rows]), ',"num_prefill_tokens":',
                     json_text(batches["num_prefill_tokens"].to_numpy()[rows]), ',"request_ids":[',
                     lists.ids.texts(",", rows), '],"request_tokens":[', lists.tokens.texts(",", rows),
                     '],"padded_size":', json_text(batches["padded_size"].to_numpy()[rows]), "}},")


def _transfer_events(result: SimulationResult) -> Iterator[pa.Array]:
    transfers, replicas = result.transfers, result.replicas
    if not len(transfers):
        return
    source, target = transfers["source_replica"].to_numpy(), transfers["target_replica"].to_numpy()
    stages = np.array([replica.pipeline_parallel_size for replica in replicas])
    names = pa.array([json.dumps(replica.name) for replica in replicas], pa.string())
    begin, end = transfers["start"].to_numpy(np.float64), transfers["end"].to_numpy(np.float64)
    request = json_text(transfers["request_id"])
    yield concat('{"name":"KV request ', request, '","cat":"kv_transfer","ph":"X","ts":', micros(begin),
                 ',"dur":', micros(end - begin), ',"pid":', json_text(source), ',"tid":', json_text(stages[source]),
                 ',"args":{"request_id":', request, ',"num_bytes":', json_text(transfers["num_bytes"]),
                 ',"num_tokens":', json_text(transfers["num_tokens"]), ',"to":', names.take(pa.array(target)), "}},")


def _cache_op_events(result: SimulationResult) -> Iterator[pa.Array]:
    spans = cache_op_spans(result.cache_ops, result.batch_stages)
    if not len(spans):
        return
    replica, stage = spans["replica_id"].to_numpy(), spans["stage_id"].to_numpy()
    yield dumped(kv_copy_lane_events(set(zip(replica.tolist(), stage.tolist()))))
    kind = json_text(spans["kind"].astype(str))
    blocks, request = json_text(spans["num_blocks"]), json_text(spans["request_id"])
    begin, end = spans["start"].to_numpy(np.float64), spans["end"].to_numpy(np.float64)
    yield concat('{"name":"', _inside_quotes(kind), " ", blocks, " blocks (request ", request,
                 ')","cat":"kv_copy","ph":"X","ts":', micros(begin), ',"dur":', micros(end - begin), ',"pid":',
                 json_text(replica), ',"tid":', json_text(KV_COPY_TID + stage), ',"args":{"batch_id":',
                 json_text(spans["batch_id"]), ',"request_id":', request, ',"kind":', kind, ',"num_blocks":',
                 blocks, "}},")


def _counter_events(result: SimulationResult) -> Iterator[pa.Array]:
    series = result.timeseries
    blocks = np.array([replica.num_blocks for replica in result.replicas], dtype=np.int64)
    for start in range(0, len(series), CHUNK_ROWS):
        part = series.iloc[start:start + CHUNK_ROWS]
        time, pid = micros(part["time"].to_numpy(np.float64)), json_text(part["replica_id"])
        used = part["kv_blocks_used"].to_numpy()
        yield concat('{"name":"KV blocks","ph":"C","ts":', time, ',"pid":', pid, ',"args":{"used":',
                     json_text(used), ',"free":', json_text(blocks[part["replica_id"].to_numpy()] - used),
                     '}},{"name":"Requests","ph":"C","ts":', time, ',"pid":', pid, ',"args":{"waiting":',
                     json_text(part["num_waiting"]), ',"running":', json_text(part["num_running"]), "}},")


def _inside_quotes(strings: pa.Array) -> pa.Array:
    """JSON strings without their quotes (to embed them in a longer string)."""
    return pc.utf8_slice_codeunits(strings, 1, -1)
