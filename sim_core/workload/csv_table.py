"""Read the columns of a CSV trace in chunks, validated, with bounded memory.

Numbers are parsed by pandas' C reader straight into float64 (the fast path); if any chunk has
text that is not a finite number, the file is read again as text so the first bad row can be
named exactly. Date-times become int64 nanoseconds since the epoch (UTC); text columns stay
text (they are only used to filter rows). Memory is one chunk of text plus the parsed columns.
"""

from __future__ import annotations

import codecs
import warnings
from collections.abc import Callable, Generator
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from sim_core.errors import TraceError, clipped
from sim_core.workload.problems import RowProblems

NUMBER, DATETIME, TEXT = "number", "datetime", "text"
# date-times are held as int64 nanoseconds since 1970, which span 1677-09-21 .. 2262-04-11
FIRST_STAMP, LAST_STAMP = pd.Timestamp("1677-09-22", tz="UTC"), pd.Timestamp("2262-04-11", tz="UTC")
CHUNK_ROWS = 1 << 18
READ_OPTIONS = {"keep_default_na": False, "skipinitialspace": True, "encoding": "utf-8-sig", "index_col": False}


class _SlowPath(Exception):
    """A chunk had a value the fast numeric parse refused: read the file again as text."""


def check_file(path: Path, name: str, max_bytes: int, expected: str) -> None:
    """Exists, not empty, not over the size limit, not UTF-16."""
    if not path.is_file():
        raise TraceError(name, "file not found")
    size = path.stat().st_size
    if size > max_bytes:
        raise TraceError(name, f"file is {size} bytes, over the {max_bytes}-byte limit")
    if size == 0:
        raise TraceError(name, f"file is empty; expected {expected}")
    with path.open("rb") as handle:
        if handle.read(2) in (b"\xff\xfe", b"\xfe\xff"):
            raise TraceError(name, "not UTF-8 text: the file is UTF-16 (starts with a byte-order mark); "
                             "save it as UTF-8")


def csv_header(path: Path, name: str) -> list[str]:
    """The column names of the header line (stripped)."""
    try:
        frame = pd.read_csv(path, nrows=0, dtype=str, **READ_OPTIONS)
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, name, exc) from None
    except pd.errors.EmptyDataError:
        raise TraceError(name, "file has no header line") from None
    except pd.errors.ParserError as exc:
        raise TraceError(name, f"malformed CSV: {' '.join(str(exc).split())}") from None
    return [str(c).strip() for c in frame.columns]


def read_csv_columns(path: Path, name: str, kinds: dict[str, str], problems: RowProblems,
                     keep: Callable[[pd.DataFrame], np.ndarray] | None = None
                     ) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """Parse the named columns of every row (after `keep`, a filter on a text chunk).

    Returns (columns, rows, num_rows): arrays by column name (float64 for numbers, int64 ns
    for date-times, str for text), the 1-based file row of each kept row, and the number of
    data rows in the file.

    Raises:
        TraceError: malformed CSV, not UTF-8, no data rows, or a bad value (unless skipping).
    """
    try:
        return _read(path, name, kinds, problems, keep, fast=True)
    except _SlowPath:
        return _read(path, name, kinds, problems, keep, fast=False)


def _read(path: Path, name: str, kinds: dict[str, str], problems: RowProblems,
          keep: Callable[[pd.DataFrame], np.ndarray] | None,
          fast: bool) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    dtypes = {c: (np.float64 if fast and kind == NUMBER else str) for c, kind in kinds.items()}
    parts: dict[str, list[np.ndarray]] = {c: [] for c in kinds}
    rows: list[np.ndarray] = []
    num_rows = 0
    with closing(_chunks(path, name, dtypes)) as chunks:   # closed early when a check raises
        for chunk in chunks:
            chunk.columns = [str(c).strip() for c in chunk.columns]
            numbers = np.arange(num_rows + 1, num_rows + len(chunk) + 1, dtype=np.int64)
            num_rows += len(chunk)
            if keep is not None:
                mask = keep(chunk)
                chunk, numbers = chunk[mask], numbers[mask]
            columns, numbers = _parse_chunk(chunk, numbers, kinds, problems, fast)
            for column, values in columns.items():
                parts[column].append(values)
            rows.append(numbers)
    if num_rows == 0:
        raise TraceError(name, "no data rows after the header")
    return {c: np.concatenate(v) for c, v in parts.items()}, np.concatenate(rows), num_rows


def _chunks(path: Path, name: str, dtypes: dict) -> Generator[pd.DataFrame, None, None]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            with pd.read_csv(path, dtype=dtypes, chunksize=CHUNK_ROWS, **READ_OPTIONS) as reader:
                yield from reader
    except pd.errors.ParserWarning:
        raise TraceError(name, f"malformed CSV: {_first_long_line(path)}") from None
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, name, exc) from None
    except (ValueError, TypeError) as exc:
        if any(dtype is np.float64 for dtype in dtypes.values()) and not isinstance(exc, pd.errors.ParserError):
            raise _SlowPath() from None
        raise TraceError(name, f"malformed CSV: {' '.join(str(exc).split())}") from None


def _parse_chunk(chunk: pd.DataFrame, numbers: np.ndarray, kinds: dict, problems: RowProblems,
                 fast: bool) -> tuple[dict[str, np.ndarray], np.ndarray]:
    keep = np.ones(len(chunk), dtype=bool)
    columns = {}
    for column, kind in kinds.items():
        if kind == NUMBER and fast:
            values = chunk[column].to_numpy(dtype=np.float64)
            if not np.all(np.isfinite(values)):
                raise _SlowPath()
        elif kind == NUMBER:   # `keep` so far: a row is counted at its first problem only
            values, ok = _numbers(chunk[column], numbers, column, problems, keep)
            keep &= ok
        elif kind == DATETIME:
            values, ok = _datetimes(chunk[column], numbers, column, problems, keep)
            keep &= ok
        else:
            values = chunk[column].to_numpy(dtype=object)
        columns[column] = values
    if not keep.all():
        columns = {c: v[keep] for c, v in columns.items()}
        numbers = numbers[keep]
    return columns, numbers


def _numbers(text: pd.Series, rows: np.ndarray, column: str, problems: RowProblems,
             alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    stripped = text.str.strip()
    values = pd.to_numeric(stripped, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)

    def describe(i: int) -> str:
        raw = stripped.iloc[i]
        if raw == "":
            return "empty value"
        if raw.lower() in ("nan", "inf", "-inf", "infinity", "-infinity"):
            return f"value '{raw}' is not a finite number"
        return f"value '{clipped(raw, 60)}' is not a number"
    return values, problems.check(~np.isfinite(values) & alive, rows, column, describe, "value(s) not a finite number")


def _datetimes(text: pd.Series, rows: np.ndarray, column: str, problems: RowProblems,
               alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    stripped = text.str.strip()
    stamps = pd.to_datetime(stripped, format="ISO8601", errors="coerce", utc=True)
    # a column of whole seconds may parse at a coarser unit that holds years ns cannot
    bad = (stamps.isna() | (stamps < FIRST_STAMP) | (stamps > LAST_STAMP)).to_numpy()
    values = np.zeros(len(text), dtype=np.int64)
    values[~bad] = stamps[~bad].astype("datetime64[ns, UTC]").astype(np.int64).to_numpy()

    def describe(i: int) -> str:
        raw = stripped.iloc[i]
        if raw == "":
            return "empty value"
        if pd.notna(pd.to_datetime(pd.Series([raw]), format="ISO8601", errors="coerce", utc=True).iloc[0]):
            return (f"value '{clipped(raw, 60)}' is outside the date range a trace may use "
                    f"({FIRST_STAMP:%Y-%m-%d} .. {LAST_STAMP:%Y-%m-%d})")
        return f"value '{clipped(raw, 60)}' is not a date-time (expected e.g. 2023-11-16 18:15:46.6805900)"
    return values, problems.check(bad & alive, rows, column, describe, "value(s) not a date-time")


def _first_long_line(path: Path) -> str:
    """Describe the first line with more fields than the header (only called on that error)."""
    with path.open(encoding="utf-8-sig") as handle:
        width = handle.readline().count(",") + 1
        for number, line in enumerate(handle, start=2):
            fields = line.count(",") + 1
            if fields > width:
                return f"line {number} has {fields} fields but the header has {width}"
    return "a row has more fields than the header"


def _not_utf8(path: Path, name: str, exc: UnicodeDecodeError) -> TraceError:
    """Name the first byte that is not UTF-8 and its line (the reader's offsets are per buffer,
    so the file is scanned again; this only runs on that error)."""
    decoder, lines = codecs.getincrementaldecoder("utf-8")(), 0
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            pending = decoder.getstate()[0]
            try:
                decoder.decode(block)
            except UnicodeDecodeError as bad:
                data = pending + block
                lines += data[len(pending): max(bad.start, len(pending))].count(b"\n")
                return TraceError(name, f"not UTF-8 text: byte 0x{data[bad.start]:02x} on line {lines + 1}")
            lines += block.count(b"\n")
    return TraceError(name, f"not UTF-8 text: {exc.reason}")
