"""Building blocks of the Chrome trace's fast encoder: JSON events written for a whole column of
rows at once, as Arrow string arrays (per element one event, or several, each followed by a
comma; null where a row has none), so that an array's character data is already the events'
list text and is written as it lies in memory.

An event is a template: literal JSON text between the columns' values (`column_text.json_text`),
concatenated element-wise. Keys come in the order of the dicts in `chrome_trace.py` and
`request_tracks.py`, values as json.dumps writes them, so the text equals
`json.dumps(event, separators=(",", ":"))` byte for byte (tests/test_output_writers.py).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim_core.export.column_text import json_text
from sim_core.export.csv_table import string_data

US = 1e6
CHUNK_ROWS = 1 << 16        # rows per array: bounds the memory of one step, never more than 2 GiB of text


def concat(*parts: pa.Array | str) -> pa.Array:
    """Element-wise concatenation of string arrays and literal text; null where a part is null."""
    return pc.binary_join_element_wise(*parts, "")


def micros(seconds: np.ndarray) -> pa.Array:
    """`seconds * 1e6` as JSON numbers (the multiplication Python does on each float)."""
    return json_text(np.asarray(seconds, dtype=np.float64) * US)


def dumped(events: list[dict]) -> pa.Array:
    """Events built as dicts (the few metadata events), as JSON text, each followed by a comma."""
    return pa.array([json.dumps(event, separators=(",", ":")) + "," for event in events], pa.string())


def event_bytes(events: pa.Array) -> memoryview:
    """The non-null elements laid end to end, as UTF-8 bytes (a view of the array's memory when
    its null elements take no room in it, as Arrow's kernels build them)."""
    if events.null_count:
        valid_bytes = pc.sum(pc.binary_length(events)).as_py() or 0
        if valid_bytes != string_data(events).nbytes:
            events = events.drop_null()
    return string_data(events)


def row_lookup(table_keys: tuple[np.ndarray, np.ndarray], keys: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """For each (a, b) of `keys`, the last row of the table whose (a, b) equals it (a dict built
    from the table's rows would hold that one), or -1 when none does. Integer columns."""
    table_a, table_b = (np.asarray(column, dtype=np.int64) for column in table_keys)
    key_a, key_b = (np.asarray(column, dtype=np.int64) for column in keys)
    if not len(table_a) or not len(key_a):
        return np.full(len(key_a), -1, dtype=np.int64)
    low_a, low_b = min(table_a.min(), key_a.min()), min(table_b.min(), key_b.min())
    width = max(table_b.max(), key_b.max()) - low_b + 1
    table = (table_a - low_a) * width + (table_b - low_b)
    wanted = (key_a - low_a) * width + (key_b - low_b)
    order = np.argsort(table, kind="stable")
    ordered = table[order]
    position = np.maximum(np.searchsorted(ordered, wanted, side="right") - 1, 0)
    return np.where(ordered[position] == wanted, order[position], -1)
