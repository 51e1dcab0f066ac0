"""Read Mooncake-style JSON lines: {"timestamp": ms, "input_length": n, "output_length": n,
"hash_ids": [...]} per line, in chunks (one chunk of parsed lines in memory at a time)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Generator
from contextlib import closing
from pathlib import Path

import numpy as np

from sim_core.errors import TraceError, shown
from sim_core.workload import hashes
from sim_core.workload.formats import MOONCAKE_KEYS
from sim_core.workload.model import take_ragged
from sim_core.workload.problems import RowProblems

CHUNK_LINES = 1 << 16


def read_mooncake(path: Path, problems: RowProblems
                  ) -> tuple[dict[str, np.ndarray], np.ndarray, int, tuple[np.ndarray, np.ndarray] | None]:
    """Returns (columns by key as float64, rows (1-based line numbers), number of records,
    (hash values, hash offsets) or None when no line has hash_ids)."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in MOONCAKE_KEYS}
    rows: list[np.ndarray] = []
    hash_values: list[np.ndarray] = []
    hash_lengths: list[np.ndarray] = []
    any_hashes, count = False, 0
    with closing(_chunks(path, problems)) as chunks:   # closed early when a check raises
        for numbers, records in chunks:
            count += len(records)
            any_hashes = any_hashes or any("hash_ids" in r for r in records)
            values, kept, flat, lengths = _parse_records(numbers, records, problems)
            for key in MOONCAKE_KEYS:
                parts[key].append(values[key])
            rows.append(kept)
            hash_values.append(flat)
            hash_lengths.append(lengths)
    if count == 0:
        raise problems.fail("no JSON records in the file")
    columns = {key: np.concatenate(v) for key, v in parts.items()}
    ragged = (np.concatenate(hash_values), hashes.offsets_of(np.concatenate(hash_lengths))) if any_hashes else None
    return columns, np.concatenate(rows), count, ragged


def _parse_records(numbers: np.ndarray, records: list[dict], problems: RowProblems
                   ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """One chunk: the numeric keys, the kept rows' line numbers, their hashes (flat, lengths)."""
    keep = np.ones(len(records), dtype=bool)
    values = {}
    for key in MOONCAKE_KEYS:
        values[key], ok = _numbers([r.get(key, _MISSING) for r in records], numbers, key, problems, keep)
        keep &= ok   # so far: a row is counted at its first problem only
    flat, lengths, ok = hashes.from_lists([r.get("hash_ids", []) for r in records], numbers, "hash_ids", problems,
                                          keep)
    flat, lengths = _keep_ragged(flat, lengths, ok, keep)
    keep &= ok
    return {key: v[keep] for key, v in values.items()}, numbers[keep], flat, lengths


class _Missing:
    def __repr__(self) -> str:
        return "missing"


_MISSING = _Missing()


def _chunks(path: Path, problems: RowProblems) -> Generator[tuple[np.ndarray, list[dict]], None, None]:
    numbers: list[int] = []
    lines: list[str] = []
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                lines.append(line)
                numbers.append(number)
            if len(lines) == CHUNK_LINES:
                yield np.array(numbers, dtype=np.int64), _parse_lines(lines, numbers, problems)
                numbers, lines = [], []
    if lines:
        yield np.array(numbers, dtype=np.int64), _parse_lines(lines, numbers, problems)


def _parse_lines(lines: list[str], numbers: list[int], problems: RowProblems) -> list[dict]:
    """All lines as one JSON array (one parser call per chunk); line by line only to name a bad one."""
    try:
        records = json.loads("[" + ",".join(lines) + "]")
    except (ValueError, RecursionError):   # not JSON, an integer over Python's digit limit, too deep
        records = None
    if records is None or len(records) != len(lines) or set(map(type, records)) != {dict}:
        records = [_parse_line(line, number, problems) for line, number in zip(lines, numbers)]
    return records


def _parse_line(line: str, number: int, problems: RowProblems) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise problems.fail(f"not valid JSON: {exc.msg} at column {exc.colno}", row=number) from None
    except RecursionError:
        raise problems.fail("not valid JSON: nested too deeply", row=number) from None
    except ValueError:   # an integer literal over Python's digit limit
        raise _long_integer(line, number, problems) from None
    if not isinstance(record, dict):
        raise problems.fail(f"expected a JSON object per line, got {type(record).__name__}", row=number)
    return record


def _long_integer(line: str, number: int, problems: RowProblems) -> TraceError:
    """The error for a line with an integer too long to convert, naming its key when it has one."""
    longest = sys.get_int_max_str_digits() + 1
    match = re.search(r'(?:"((?:[^"\\]|\\.){0,100})"\s*:\s*)?-?(\d{' + str(longest) + ',})', line)
    digits = len(match.group(2)) if match else "too many"
    return problems.fail(f"value is an integer of {digits} digits, too large for a number",
                         row=number, column=match.group(1) if match else None)


def _numbers(raw: list, rows: np.ndarray, key: str, problems: RowProblems,
             alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    try:
        if not set(map(type, raw)) <= {int, float}:
            raise TypeError
        values = np.array(raw, dtype=np.float64)   # the usual case: convert at C speed
    except (TypeError, OverflowError):   # not numbers, or an integer beyond float64
        values = np.array([_float_or_nan(v) for v in raw], dtype=np.float64)

    def describe(i: int) -> str:
        value = raw[i]
        if value is _MISSING:
            return f"missing key '{key}'"
        if type(value) is int:
            return f"value {shown(value, 40)} is too large for a number"
        if isinstance(value, (list, dict)):
            return f"value {shown(value, 40)} is not a finite number"
        return f"value {json.dumps(value)[:40]} is not a finite number"
    return values, problems.check(~np.isfinite(values) & alive, rows, key, describe, "value(s) not a finite number")


def _float_or_nan(value: object) -> float:
    if type(value) is float:
        return value
    if type(value) is int and abs(value) < 2**1023:
        return float(value)
    return np.nan


def _keep_ragged(flat: np.ndarray, lengths: np.ndarray, ok: np.ndarray,
                 keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hash lists are returned for the `ok` rows; drop those of rows other checks removed."""
    survivors = keep[ok]
    if survivors.all():
        return flat, lengths
    offsets = hashes.offsets_of(lengths)
    rows = np.flatnonzero(survivors)
    values, new_offsets = take_ragged(flat, offsets, rows)
    return values, np.diff(new_offsets)
