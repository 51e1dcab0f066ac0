"""A DataFrame as CSV bytes identical to pandas' `to_csv(index=False)`, written through Arrow.

Each column becomes its cells' text (`column_text.py`), then Arrow's CSV writer lays out the rows
(unquoted: it would quote every string cell, pandas only those that need it). A chunk in which
some cell needs quotes (a reject reason with a comma) is laid out by joining the cells
element-wise instead, with those cells quoted as Python's csv module quotes them. A column of a
kind `column_text` does not write sends the whole table to pandas. Rows are written in chunks of
CHUNK_ROWS, so a table of millions of rows is never one string.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from sim_core.export.column_text import csv_header, csv_quoted, csv_text

CHUNK_ROWS = 1 << 18
ColumnText = Callable[[slice], pa.Array]     # rows -> the CSV cells of a column computed elsewhere


def csv_pieces(frame: pd.DataFrame, computed: Mapping[str, ColumnText] | None = None) -> Iterator[bytes | memoryview]:
    """`frame.to_csv(index=False)` encoded as UTF-8, in pieces.

    Args:
        frame: the table.
        computed: columns whose cells the caller provides as text (e.g. batches' request ids).
    """
    computed = computed or {}
    names = [str(name) for name in frame.columns]
    plain = [name for name in frame.columns if name not in computed]
    if not names or any(csv_text(frame[name].iloc[:0]) is None for name in plain):
        texts = {name: computed[name](slice(None)).to_pylist() for name in computed}
        yield frame.assign(**texts).to_csv(index=False).encode("utf-8")
        return
    yield (csv_header(names) + os.linesep).encode("utf-8")
    for start in range(0, len(frame), CHUNK_ROWS):
        rows = slice(start, start + CHUNK_ROWS)
        cells = [computed[name](rows) if name in computed else csv_text(frame[name].iloc[rows])
                 for name in frame.columns]
        yield _rows(cells)


def _rows(cells: list[pa.Array | None]) -> bytes | memoryview:
    """The CSV lines of a chunk of rows (a column per entry of `cells`)."""
    columns: list[pa.Array] = [column for column in cells if column is not None]
    if len(columns) == 1:          # csv quotes an empty cell that is a whole row: ""
        text = pc.cast(columns[0], pa.string())
        blank = pc.fill_null(pc.equal(text, ""), True)
        if pc.any(blank).as_py():
            return _joined_rows([pc.if_else(blank, '""', csv_quoted(text) or text)])
    quoted = [csv_quoted(column) for column in columns]
    if any(column is not None for column in quoted):
        return _joined_rows([new if new is not None else old for new, old in zip(quoted, columns)])
    sink = pa.BufferOutputStream()
    table = pa.Table.from_arrays(columns, names=[f"c{i}" for i in range(len(columns))])
    pa_csv.write_csv(table, sink, pa_csv.WriteOptions(include_header=False, quoting_style="none", eol=os.linesep,
                                                     batch_size=CHUNK_ROWS))
    return memoryview(sink.getvalue())


def _joined_rows(columns: list[pa.Array]) -> memoryview:
    """The lines of cells already written as text (ints cast), nulls as empty cells."""
    parts: list[pa.Array | str] = []
    for column in columns:
        parts += [pc.cast(column, pa.string()), ","]
    parts[-1] = os.linesep
    lines = pc.binary_join_element_wise(*parts, "", null_handling="replace", null_replacement="")
    return string_data(lines)


def string_data(text: pa.Array) -> memoryview:
    """The strings of an Arrow string array (no nulls) laid end to end (a view of its buffer)."""
    if not len(text):
        return memoryview(b"")
    offsets = text.buffers()[1]
    width = 8 if pa.types.is_large_string(text.type) else 4
    first = int.from_bytes(offsets[text.offset * width:(text.offset + 1) * width], "little", signed=True)
    last = int.from_bytes(offsets[(text.offset + len(text)) * width:(text.offset + len(text) + 1) * width],
                          "little", signed=True)
    return memoryview(text.buffers()[2][first:last])
