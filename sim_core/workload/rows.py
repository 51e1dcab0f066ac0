"""Parsed trace columns on their way to a Workload: row filtering kept aligned, row checks."""

from __future__ import annotations

import numpy as np

from sim_core.config.limits import HORIZON_S, MAX_TOKENS
from sim_core.workload.model import take_ragged
from sim_core.workload.problems import RowProblems

PROMPT, OUTPUT = "num_prefill_tokens", "num_decode_tokens"
NON_NEGATIVE = ("session_id", "turn", "prefix_len")
AT_LEAST_ONE = ("n",)  # parallel samples per request
MAX_ID = 2**53         # ids, turns, priorities, n: whole numbers a float64 column holds exactly


class ParsedRows:
    """Columns by canonical name (float64 or int64 arrays), the 1-based file row of each, and
    optional prefix-block hashes as (flat values, offsets). Every filter keeps them aligned."""

    def __init__(self, columns: dict[str, np.ndarray], rows: np.ndarray,
                 hashes: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.columns, self.rows, self.hashes = columns, rows, hashes

    def __len__(self) -> int:
        return len(self.rows)

    def keep(self, mask: np.ndarray) -> None:
        if mask.all():
            return
        self.columns = {name: values[mask] for name, values in self.columns.items()}
        self.rows = self.rows[mask]
        if self.hashes is not None:
            self.hashes = take_ragged(*self.hashes, np.flatnonzero(mask))

    def reorder(self, order: np.ndarray) -> None:
        self.columns = {name: values[order] for name, values in self.columns.items()}
        self.rows = self.rows[order]
        if self.hashes is not None:
            self.hashes = take_ragged(*self.hashes, order)


def check_tokens(parsed: ParsedRows, names: dict[str, str], problems: RowProblems, notes: list[str]) -> None:
    """Token counts must be whole, non-negative and at most MAX_TOKENS; zero counts as one token
    (Vidur's rule, said in a note). `names` maps canonical names to the file's column names."""
    for canonical in (PROMPT, OUTPUT):
        _whole_non_negative(parsed, canonical, names[canonical], problems)
        _at_most(parsed, canonical, names[canonical], MAX_TOKENS, "tokens", problems)
        values = parsed.columns[canonical]
        zeros = int(np.count_nonzero(values == 0))
        if zeros:
            parsed.columns[canonical] = np.maximum(values, 1)
            notes.append(f"{problems.file}: {zeros} row(s) had {names[canonical]} = 0; "
                         "counted as 1 token, as Vidur does")
        parsed.columns[canonical] = parsed.columns[canonical].astype(np.int64)


def check_optional(parsed: ParsedRows, problems: RowProblems) -> None:
    """Optional id columns must be whole numbers (ids, turns and prefix lengths non-negative,
    parallel samples n at least 1), prefix lengths at most MAX_TOKENS, the others at most MAX_ID
    in magnitude."""
    for name in [n for n in parsed.columns if n not in (PROMPT, OUTPUT, "arrived_at")]:
        if name in NON_NEGATIVE or name in AT_LEAST_ONE:
            _whole_non_negative(parsed, name, name, problems)
            if name in AT_LEAST_ONE:
                _at_least_one(parsed, name, problems)
        else:
            _whole(parsed, name, name, problems)
        if name == "prefix_len":
            _at_most(parsed, name, name, MAX_TOKENS, "tokens", problems)
        else:
            _at_most(parsed, name, name, MAX_ID, "in magnitude", problems)
        parsed.columns[name] = parsed.columns[name].astype(np.int64)


def check_times(parsed: ParsedRows, column: str, problems: RowProblems) -> None:
    values = parsed.columns["arrived_at"]
    parsed.keep(problems.check(values < 0, parsed.rows, column,
                               lambda i: f"arrival time {float(values[i])!r} is negative", "negative time(s)"))


def check_horizon(parsed: ParsedRows, column: str, unit: str, problems: RowProblems) -> None:
    """Arrival times (now in seconds; the file's `unit` was s, ms or datetime, counted from the
    first request) must not pass HORIZON_S, the latest time the simulated clock resolves finely."""
    values = parsed.columns["arrived_at"]

    def describe(i: int) -> str:
        seconds = float(values[i])
        was = {"ms": f"{seconds * 1000:.6g} ms = ", "datetime": "the first request + "}.get(unit, "")
        return f"arrival time {was}{seconds:.6g} s is past the {HORIZON_S:g} s horizon of simulated time"
    parsed.keep(problems.check(values > HORIZON_S, parsed.rows, column, describe, "time(s) past the horizon"))


def _at_most(parsed: ParsedRows, canonical: str, column: str, limit: int, unit: str,
             problems: RowProblems) -> None:
    values = parsed.columns[canonical]
    parsed.keep(problems.check(np.abs(values) > limit, parsed.rows, column,
                               lambda i: f"value {_shown(values[i])} is over the limit of {limit} {unit}",
                               "value(s) over the limit"))


def _whole(parsed: ParsedRows, canonical: str, column: str, problems: RowProblems) -> None:
    values = parsed.columns[canonical]
    parsed.keep(problems.check(values != np.floor(values), parsed.rows, column,
                               lambda i: f"value {_shown(values[i])} is not a whole number", "fractional value(s)"))


def _whole_non_negative(parsed: ParsedRows, canonical: str, column: str, problems: RowProblems) -> None:
    values = parsed.columns[canonical]
    parsed.keep(problems.check(values != np.floor(values), parsed.rows, column,
                               lambda i: f"value {_shown(values[i])} is not a whole number of tokens"
                               if canonical in (PROMPT, OUTPUT, "prefix_len") else
                               f"value {_shown(values[i])} is not a whole number", "fractional value(s)"))
    values = parsed.columns[canonical]
    parsed.keep(problems.check(values < 0, parsed.rows, column,
                               lambda i: f"value {_shown(values[i])} is negative", "negative value(s)"))


def _at_least_one(parsed: ParsedRows, name: str, problems: RowProblems) -> None:
    values = parsed.columns[name]
    parsed.keep(problems.check(values < 1, parsed.rows, name,
                               lambda i: f"value {_shown(values[i])} is below 1 (parallel samples)",
                               "value(s) below 1"))


def _shown(value: float) -> int | float | str:
    if abs(value) >= 1e15:
        return repr(float(value))
    return int(value) if value == np.floor(value) else float(value)


def sort_by_time(parsed: ParsedRows, name: str, column: str, notes: list[str]) -> None:
    times = parsed.columns["arrived_at"]
    if np.any(np.diff(times) < 0):
        parsed.reorder(np.argsort(times, kind="stable"))
        notes.append(f"{name}: rows were not sorted by {column}; sorted them (ties keep file order)")


def handle_duplicates(parsed: ParsedRows, name: str, drop: bool, notes: list[str]) -> None:
    """Rows equal to an earlier row in arrival time and both lengths are counted (and dropped
    when asked); real traces can hold such rows legitimately, so they are kept by default."""
    if len(parsed) < 2:
        return
    keys = [parsed.columns[k] for k in (OUTPUT, PROMPT, "arrived_at")]
    order = np.lexsort(keys)   # stable: among equal rows the earliest comes first
    same = np.ones(len(order) - 1, dtype=bool)
    for values in keys:
        same &= values[order[1:]] == values[order[:-1]]
    repeated = np.zeros(len(parsed), dtype=bool)
    repeated[order[1:][same]] = True
    count = int(repeated.sum())
    if not count:
        return
    if drop:
        parsed.keep(~repeated)
        notes.append(f"{name}: dropped {count} row(s) that repeat an earlier row's arrival time and "
                     "lengths exactly (drop_duplicates)")
    else:
        notes.append(f"{name}: {count} row(s) repeat an earlier row's arrival time and lengths exactly; "
                     "kept them (set drop_duplicates to remove them)")
