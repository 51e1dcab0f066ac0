"""Prefix-block hashes (Mooncake's `hash_ids`): ragged lists of non-negative integers per row,
kept flat as (values, offsets)."""

from __future__ import annotations

from itertools import chain

import numpy as np

from sim_core.errors import shown
from sim_core.workload.problems import RowProblems


def from_lists(lists: list, rows: np.ndarray, column: str, problems: RowProblems,
               alive: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flatten per-row lists of integers; returns (values, lengths, keep mask). Rows not
    `alive` (already found bad) are not counted again."""
    if set(map(type, lists)) <= {list} and set(map(type, chain.from_iterable(lists))) <= {int}:
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        try:
            values = np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(lengths.sum()))
        except OverflowError:
            values = np.array([-1])
        if not len(values) or values.min() >= 0:   # the usual case, checked at C speed
            return values, lengths, np.ones(len(lists), dtype=bool)
    ok = np.array([isinstance(v, list) and all(type(x) is int and 0 <= x < 2**63 for x in v) for v in lists],
                  dtype=bool)
    bad = ~ok if alive is None else ~ok & alive
    problems.check(bad, rows, column, lambda i: f"value {_short(lists[i])} is not a list of non-negative "
                   "64-bit integers", "bad hash list(s)")
    keep = ok
    good = [v for v, k in zip(lists, keep) if k]
    lengths = np.fromiter(map(len, good), dtype=np.int64, count=len(good))
    values = np.fromiter(chain.from_iterable(good), dtype=np.int64, count=int(lengths.sum()))
    return values, lengths, keep


def from_text(texts: np.ndarray, rows: np.ndarray, column: str,
              problems: RowProblems) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parse space-separated integers per row (the canonical CSV's hash_ids column)."""
    lists = [_ints(str(t)) for t in texts]
    return from_lists(lists, rows, column, problems)


def offsets_of(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)


def to_text(values: np.ndarray, offsets: np.ndarray) -> list[str]:
    """One space-separated string per row (for writing the canonical CSV)."""
    flat = values.tolist()
    return [" ".join(map(str, flat[a:b])) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def _ints(text: str) -> list[int] | str:
    try:
        return [int(part) for part in text.split()]
    except ValueError:
        return text


def _short(value: object) -> str:
    return shown(value, 40)
