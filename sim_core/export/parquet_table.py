"""A table as a Parquet file (`run --tables parquet`): the DataFrame's columns with their types
(ints, floats, strings, categories as dictionaries), the batches' request lists as list<int64>
columns instead of the CSV's space-separated text."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import pandas as pd

    from sim_core.export.batch_lists import ListColumn


def parquet_bytes(frame: pd.DataFrame, lists: Mapping[str, ListColumn] | None = None) -> bytes:
    """The Parquet file of `frame` (no index); `lists` gives the columns of int tuples."""
    lists = lists or {}
    plain = frame.drop(columns=list(lists))
    table = pa.Table.from_pandas(plain, preserve_index=False)
    for position, name in enumerate(frame.columns):
        if name in lists:
            table = table.add_column(position, name, _list_array(lists[name]))
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _list_array(column: ListColumn) -> pa.Array:
    """One list of ints per row."""
    _, values = column.per_row()
    offsets = np.concatenate([[0], np.cumsum(column.lengths)])
    if offsets[-1] < 2**31:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values))
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
