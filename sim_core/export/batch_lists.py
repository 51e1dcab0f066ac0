"""The batches table's `request_ids` and `request_tokens` (a tuple of ints per batch) as flat
integer arrays and as text, built once per run for every file that writes them (batches.csv or
.parquet and the Chrome trace).

The engine hands a fast-forwarded decode run's batches the same tuple object, so each distinct
object is converted once (a quarter of the rows of a 10,000-request vllm run hold one seen
before): the text of a row is its object's text, taken by index. Objects are told apart by
identity (`id`), never by value, so two equal tuples are merely converted twice.
"""

from __future__ import annotations

import itertools
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

WHOLE_TEXT_ITEMS = 20_000_000      # items whose text is built at once (about 200 MB of it)


class ListColumn:
    """One column of int tuples. `run_of_row[i]`: which distinct tuple object ("run") row i
    holds; the runs' tuples laid end to end in `values`, run r's at `offsets[r]:offsets[r + 1]`."""

    def __init__(self, column: pd.Series) -> None:
        cells = column.to_numpy(dtype=object)
        identities = np.fromiter(map(id, cells), dtype=np.uint64, count=len(cells))
        codes, _ = pd.factorize(identities)                     # numbered in order of first appearance
        self.run_of_row = codes.astype(np.int64)
        before = np.full(len(cells), -1, dtype=np.int64)        # the highest code of the rows before
        before[1:] = np.maximum.accumulate(self.run_of_row)[:-1]
        runs = cells[self.run_of_row > before]
        lengths = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
        self.offsets = np.zeros(len(runs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.offsets[1:])
        self.values = np.fromiter(itertools.chain.from_iterable(runs), dtype=np.int64, count=int(self.offsets[-1]))
        self._joined: dict[str, pa.Array] = {}       # separator -> each run's items joined by it

    @cached_property
    def lengths(self) -> np.ndarray:
        """Items per row."""
        return np.diff(self.offsets)[self.run_of_row]

    @cached_property
    def sums(self) -> np.ndarray:
        """Sum of the items of each row."""
        totals = np.concatenate([[0], np.cumsum(self.values)])
        return (totals[self.offsets[1:]] - totals[self.offsets[:-1]])[self.run_of_row]

    def per_row(self) -> tuple[np.ndarray, np.ndarray]:
        """(row, item) of every item of every row, rows in order."""
        lengths = self.lengths
        rows = np.repeat(np.arange(len(lengths)), lengths)
        row_starts = np.cumsum(lengths) - lengths                      # where each row's items begin
        positions = np.arange(len(rows)) + np.repeat(self.offsets[:-1][self.run_of_row] - row_starts, lengths)
        return rows, self.values[positions]

    def texts(self, separator: str, rows: slice | np.ndarray = slice(None)) -> pa.Array:
        """Each row's items joined by `separator` ("" for an empty tuple), for `rows` (a slice or
        row numbers). Up to WHOLE_TEXT_ITEMS items every run's text is built once per separator;
        beyond, only the text of the runs `rows` hold (an Arrow string array holds 2 GiB)."""
        runs = self.run_of_row[rows]
        if len(self.values) <= WHOLE_TEXT_ITEMS:
            if separator not in self._joined:
                self._joined[separator] = _joined(self.offsets, self.values, separator)
            return self._joined[separator].take(pa.array(runs))
        needed, which = np.unique(runs, return_inverse=True)
        lengths = self.offsets[needed + 1] - self.offsets[needed]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        positions = np.arange(offsets[-1]) + np.repeat(self.offsets[needed] - offsets[:-1], lengths)
        return _joined(offsets, self.values[positions], separator).take(pa.array(which))


def _joined(offsets: np.ndarray, values: np.ndarray, separator: str) -> pa.Array:
    """The lists values[offsets[i]:offsets[i + 1]] as text, items joined by `separator`."""
    items = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pc.cast(pa.array(values), pa.string()))
    return pc.binary_join(items, separator)


class BatchLists:
    """`request_ids` and `request_tokens` of a batches table (see ListColumn)."""

    def __init__(self, batches: pd.DataFrame) -> None:
        self.ids = ListColumn(batches["request_ids"])
        self.tokens = ListColumn(batches["request_tokens"])
