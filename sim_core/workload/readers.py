"""Read a trace file in any supported format (auto-detected or named) into a Workload.

Every value is validated; a bad one stops the read with one line naming file, row, column and
reason, unless `on_bad_rows: skip`, in which case bad rows are dropped and a note says how
many and why. Unsorted arrivals are sorted (with a note); exact duplicate rows are counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sim_core.errors import TraceError
from sim_core.workload import csv_table, hashes
from sim_core.workload.csv_table import DATETIME, NUMBER, TEXT
from sim_core.workload.formats import (
    CSV_FORMATS,
    CsvFormat,
    check_columns,
    detect_csv_format,
    is_json_lines,
)
from sim_core.workload.jsonl import read_mooncake
from sim_core.workload.model import Workload
from sim_core.workload.problems import RowProblems
from sim_core.workload.rows import (
    OUTPUT,
    PROMPT,
    ParsedRows,
    check_horizon,
    check_optional,
    check_times,
    check_tokens,
    handle_duplicates,
    sort_by_time,
)

MAX_TRACE_BYTES = 4 * 1024**3


@dataclass(frozen=True)
class ReadOptions:
    """How to read a trace (the workload section of the scenario fills these in)."""

    format: str = "auto"
    on_bad_rows: str = "error"          # "error" or "skip"
    max_bytes: int = MAX_TRACE_BYTES
    model: str | None = None            # BurstGPT: keep rows of this Model only
    log_type: str | None = None         # BurstGPT: keep rows of this Log Type only
    drop_duplicates: bool = False
    hash_block_size: int = 512          # tokens per hash id (Mooncake uses 512)


@dataclass(frozen=True)
class TraceRead:
    """A read trace: the workload, the format used, whether the file had arrival times
    (vidur_lengths has none: arrived_at is 0), and how many data rows the file held."""

    workload: Workload
    format: str
    has_arrivals: bool
    num_file_rows: int


def read_trace(path: str | Path, options: ReadOptions = ReadOptions()) -> TraceRead:
    """Read, validate and sort a trace.

    Raises:
        TraceError: naming file, row, column and reason for the first problem found.
    """
    path, name = Path(path), str(path)
    csv_table.check_file(path, name, options.max_bytes, _expected(options.format))
    if options.format == "mooncake" or (options.format == "auto" and is_json_lines(path)):
        return _read_mooncake(path, name, options)
    columns = csv_table.csv_header(path, name)
    fmt = detect_csv_format(columns, name) if options.format == "auto" else options.format
    spec = CSV_FORMATS[fmt]
    check_columns(spec, columns, name)
    problems = RowProblems(name, options.on_bad_rows == "skip")
    kinds = _kinds(spec, columns)
    values, rows, num_rows = csv_table.read_csv_columns(path, name, kinds, problems, _filter(spec, options))
    notes = _filter_notes(spec, options, name, len(rows), num_rows, problems)
    parsed = ParsedRows(_canonical(spec, values, len(rows)), rows)
    if "hash_ids" in parsed.columns:
        text = parsed.columns.pop("hash_ids")
        flat, lengths, keep = hashes.from_text(text, parsed.rows, "hash_ids", problems)
        parsed.keep(keep)
        parsed.hashes = (flat, hashes.offsets_of(lengths))
    return _finish(parsed, spec, name, fmt, num_rows, problems, options, notes)


def _expected(fmt: str) -> str:
    if fmt == "mooncake":
        return "one JSON object per line"
    header = ",".join(CSV_FORMATS[fmt if fmt in CSV_FORMATS else "vidur"].required)
    return f"a header line {'like ' if fmt == 'auto' else ''}'{header}' and one row per request"


def _kinds(spec: CsvFormat, columns: list[str]) -> dict[str, str]:
    kinds = {}
    if spec.time:
        kinds[spec.time] = DATETIME if spec.time_unit == "datetime" else NUMBER
    kinds[spec.prompt] = kinds[spec.output] = NUMBER
    for column in spec.optional:
        if column in columns:
            kinds[column] = TEXT if column == "hash_ids" else NUMBER
    for column in spec.text:
        kinds[column] = TEXT
    return kinds


def _filter(spec: CsvFormat, options: ReadOptions) -> Callable[[pd.DataFrame], np.ndarray] | None:
    wanted = {c: v for c, v in zip(("Model", "Log Type"), (options.model, options.log_type))
              if v is not None and c in spec.text}
    if not wanted:
        return None
    def keep(chunk: pd.DataFrame) -> np.ndarray:
        mask = np.ones(len(chunk), dtype=bool)
        for column, value in wanted.items():
            mask &= (chunk[column].str.strip() == value).to_numpy()
        return mask
    return keep


def _filter_notes(spec: CsvFormat, options: ReadOptions, name: str, kept: int, num_rows: int,
                  problems: RowProblems) -> list[str]:
    wanted = [f"{c} = {v}" for c, v in zip(("Model", "Log Type"), (options.model, options.log_type))
              if v is not None and c in spec.text]
    if not wanted:
        return []
    if kept == 0 and not problems.skipped:
        raise TraceError(name, f"no row has {' and '.join(wanted)} (filter set in the workload section)")
    return [f"{name}: kept {kept} of {num_rows} row(s) with {' and '.join(wanted)}"]


def _canonical(spec: CsvFormat, values: dict, n: int) -> dict[str, np.ndarray]:
    columns = {"arrived_at": values[spec.time] if spec.time else np.zeros(n),
               PROMPT: values[spec.prompt], OUTPUT: values[spec.output]}
    for column in spec.optional:
        if column in values:
            columns[column] = values[column]
    return columns


def _to_seconds(parsed: ParsedRows, unit: str, name: str) -> list[str]:
    times = parsed.columns["arrived_at"]
    if unit == "ms":
        parsed.columns["arrived_at"] = times / 1000.0
    if unit != "datetime" or not len(times):
        return []
    first = int(times.min())
    parsed.columns["arrived_at"] = (times - first) / 1e9
    stamp = np.datetime64(first, "ns").astype("datetime64[us]")
    return [f"{name}: arrival times are seconds after the first request ({stamp} UTC)"]


def _finish(parsed: ParsedRows, spec: CsvFormat, name: str, fmt: str, num_rows: int, problems: RowProblems,
            options: ReadOptions, notes: list[str]) -> TraceRead:
    time_column = spec.time or "arrived_at"
    if spec.time and spec.time_unit != "datetime":
        check_times(parsed, spec.time, problems)
    notes += _to_seconds(parsed, spec.time_unit, name)
    if spec.time:
        check_horizon(parsed, spec.time, spec.time_unit, problems)
    check_tokens(parsed, {PROMPT: spec.prompt, OUTPUT: spec.output}, problems, notes)
    check_optional(parsed, problems)
    if not len(parsed):
        raise TraceError(name, f"no usable rows: all {num_rows} were skipped ({'; '.join(problems.skipped)})")
    notes[:0] = problems.summary(num_rows)
    sort_by_time(parsed, name, time_column, notes)
    handle_duplicates(parsed, name, options.drop_duplicates, notes)
    columns = parsed.columns
    flat, offsets = parsed.hashes if parsed.hashes is not None else (None, None)
    workload = Workload(columns.pop("arrived_at").astype(np.float64), columns.pop(PROMPT), columns.pop(OUTPUT),
                        name, tuple(notes), **columns, hash_ids=flat, hash_offsets=offsets,
                        hash_block_size=options.hash_block_size if flat is not None else 0)
    return TraceRead(workload, fmt, spec.time is not None, num_rows)


MOONCAKE = CsvFormat("mooncake", "timestamp", "ms", "input_length", "output_length")


def _read_mooncake(path: Path, name: str, options: ReadOptions) -> TraceRead:
    problems = RowProblems(name, options.on_bad_rows == "skip", header_lines=0)
    values, rows, num_rows, ragged = read_mooncake(path, problems)
    parsed = ParsedRows(_canonical(MOONCAKE, values, len(rows)), rows, ragged)
    return _finish(parsed, MOONCAKE, name, "mooncake", num_rows, problems, options, [])
