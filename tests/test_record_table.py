"""The recorder's growing tables (sim_core/results/record.py, Table): rows appended one by one
and chunks made in bulk come out as one set of typed columns."""

from __future__ import annotations

import numpy as np

from sim_core.results.record import Table


def _table() -> Table:
    return Table({"time": np.float64, "replica": np.int64, "ids": object})


def test_rows_then_chunks_in_order():
    """One row from the stepwise lists, then two chunks: an array column joins the chunks'
    arrays, a one-value column repeats the value over its chunk's rows, a tuple is one object
    per row (not spread over the rows)."""
    table = _table()
    for name, value in (("time", 0.5), ("replica", 1), ("ids", (7,))):
        table.columns[name].append(value)
    table.add_chunk_values(2, np.array([1.0, 2.0]), 0, (3, 4))
    table.add_chunk_values(3, np.array([3.0, 4.0, 5.0]), 1, (5,))
    arrays = table.arrays()
    assert arrays["time"].tolist() == [0.5, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert arrays["replica"].tolist() == [1, 0, 0, 1, 1, 1] and arrays["replica"].dtype == np.int64
    assert arrays["ids"].tolist() == [(7,), (3, 4), (3, 4), (5,), (5,), (5,)]
    assert (table.list_rows, table.chunk_rows) == (1, 5)


def test_a_column_with_arrays_and_single_values():
    """A column given as a list in one chunk and as one value in the next: 2 rows [8, 9], then
    3 rows of 6 (each chunk's rows made on their own, then joined)."""
    table = _table()
    table.add_chunk_values(2, np.array([0.0, 0.0]), [8, 9], ())
    table.add_chunk_values(3, 1.5, 6, ())
    arrays = table.arrays()
    assert arrays["replica"].tolist() == [8, 9, 6, 6, 6]
    assert arrays["time"].tolist() == [0.0, 0.0, 1.5, 1.5, 1.5]


def test_empty_chunks_are_dropped_and_an_empty_table_is_typed():
    """A chunk of no rows adds nothing; a table without rows has empty columns of its types."""
    table = _table()
    table.add_chunk_values(0, np.array([]), 3, (1,))
    arrays = table.arrays()
    assert table.chunks == [] and table.chunk_rows == 0
    assert [(len(values), values.dtype) for values in arrays.values()] == [
        (0, np.float64), (0, np.int64), (0, np.dtype(object))]
