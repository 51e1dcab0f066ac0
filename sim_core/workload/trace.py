"""Read a trace in Vidur's replay format, validating every row.

Format: CSV with a header holding at least `arrived_at,num_prefill_tokens,num_decode_tokens`
(seconds since the start, prompt tokens, output tokens); other columns are ignored.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from sim_core.errors import TraceError

REPLAY_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
TOKEN_COLUMNS = REPLAY_COLUMNS[1:]
MAX_TRACE_BYTES = 4 * 1024**3


def read_replay_trace(path: str | Path, max_bytes: int = MAX_TRACE_BYTES):
    """Return (arrived_at, prefill, decode, notes) from a Vidur replay CSV, sorted by arrival.

    Raises:
        TraceError: naming the file, row, column and reason for the first problem found.
    """
    name = str(path)
    frame = _read_frame(Path(path), name, max_bytes)
    _check_columns(frame, name)
    values = {col: _numeric_column(frame[col], name, col) for col in REPLAY_COLUMNS}
    _check_times(values["arrived_at"], name)
    notes = []
    for col in TOKEN_COLUMNS:
        _check_tokens(values[col], name, col)
        zeros = int(np.count_nonzero(values[col] == 0))
        if zeros:
            values[col] = np.maximum(values[col], 1)
            notes.append(f"{name}: {zeros} row(s) had {col} = 0; counted as 1 token, as Vidur does")
    arrived, prefill, decode = (values["arrived_at"], values[TOKEN_COLUMNS[0]].astype(np.int64),
                                values[TOKEN_COLUMNS[1]].astype(np.int64))
    if np.any(np.diff(arrived) < 0):
        order = np.argsort(arrived, kind="stable")
        arrived, prefill, decode = arrived[order], prefill[order], decode[order]
        notes.append(f"{name}: rows were not sorted by arrived_at; sorted them (ties keep file order)")
    return arrived, prefill, decode, notes


def _read_frame(path: Path, name: str, max_bytes: int) -> pd.DataFrame:
    if not path.is_file():
        raise TraceError(name, "file not found")
    size = path.stat().st_size
    if size > max_bytes:
        raise TraceError(name, f"file is {size} bytes, over the {max_bytes}-byte limit")
    if size == 0:
        raise TraceError(name, "file is empty; expected a header line "
                         f"'{','.join(REPLAY_COLUMNS)}' and one row per request")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True,
                                encoding="utf-8-sig", index_col=False)
    except pd.errors.ParserWarning:
        raise TraceError(name, f"malformed CSV: {_first_long_line(path)}") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise TraceError(name, f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} on line {line}") from None
    except pd.errors.EmptyDataError:
        raise TraceError(name, "file has no header line") from None
    except pd.errors.ParserError as exc:
        raise TraceError(name, f"malformed CSV: {' '.join(str(exc).split())}") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if frame.empty:
        raise TraceError(name, "no data rows after the header")
    return frame


def _first_long_line(path: Path) -> str:
    """Describe the first line with more fields than the header (only called on that error)."""
    with path.open(encoding="utf-8-sig") as handle:
        width = handle.readline().count(",") + 1
        for number, line in enumerate(handle, start=2):
            fields = line.count(",") + 1
            if fields > width:
                return f"line {number} has {fields} fields but the header has {width}"
    return "a row has more fields than the header"


def _check_columns(frame: pd.DataFrame, name: str) -> None:
    missing = [c for c in REPLAY_COLUMNS if c not in frame.columns]
    if missing:
        raise TraceError(name, f"missing column(s) {', '.join(missing)}; found: "
                         f"{', '.join(frame.columns)}; expected: {', '.join(REPLAY_COLUMNS)}")


def _numeric_column(text: pd.Series, name: str, column: str) -> np.ndarray:
    stripped = text.str.strip()
    numbers = pd.to_numeric(stripped, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = np.flatnonzero(~np.isfinite(numbers))
    if len(bad):
        raw = stripped.iloc[bad[0]]
        reason = "empty value" if raw == "" else (
            f"value '{raw}' is not a finite number" if raw.lower() in ("nan", "inf", "-inf", "infinity")
            else f"value '{raw}' is not a number")
        raise TraceError(name, _with_more(reason, len(bad)), row=int(bad[0]) + 1, column=column)
    return numbers


def _check_times(arrived: np.ndarray, name: str) -> None:
    bad = np.flatnonzero(arrived < 0)
    if len(bad):
        raise TraceError(name, _with_more(f"arrival time {float(arrived[bad[0]])!r} is negative", len(bad)),
                         row=int(bad[0]) + 1, column="arrived_at")


def _check_tokens(tokens: np.ndarray, name: str, column: str) -> None:
    for mask, reason in ((tokens != np.floor(tokens), "is not a whole number of tokens"),
                         (tokens < 0, "is negative")):
        bad = np.flatnonzero(mask)
        if len(bad):
            value = tokens[bad[0]]
            shown = int(value) if value == np.floor(value) else value
            raise TraceError(name, _with_more(f"value {shown} {reason}", len(bad)),
                             row=int(bad[0]) + 1, column=column)


def _with_more(reason: str, count: int) -> str:
    return reason if count == 1 else f"{reason} (and {count - 1} more such rows)"


def write_replay_trace(workload, path: str | Path) -> None:
    """Write a workload in the replay format (floats in shortest round-trip form)."""
    frame = pd.DataFrame({"arrived_at": workload.arrived_at, "num_prefill_tokens": workload.num_prefill_tokens,
                          "num_decode_tokens": workload.num_decode_tokens})
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
