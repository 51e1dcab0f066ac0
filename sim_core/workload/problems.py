"""Bad rows of a trace: stop at the first (naming file, row, column, reason) or skip and count.

Checks are vectorised: each passes a mask of bad rows, the file row numbers of the rows it
looked at, and how to describe the first bad one. Skipped rows are counted per reason so the
user reads exactly how many rows were dropped and why; nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim_core.errors import TraceError


class RowProblems:
    """Collects the outcome of row checks for one file."""

    def __init__(self, file: str, skip: bool, header_lines: int = 1) -> None:
        self.file, self.skip, self.header_lines = file, skip, header_lines
        self.skipped: dict[str, int] = {}   # "column 'X': reason" -> rows skipped for it

    def check(self, bad: np.ndarray, rows: np.ndarray, column: str | None, describe: Callable[[int], str],
              label: str) -> np.ndarray:
        """Return the mask of rows to keep. `bad` flags rows; `rows` are their 1-based row
        numbers in the file; `describe(i)` explains bad row i (index into `bad`), `label`
        names the reason in the skip summary.

        Raises:
            TraceError: when not skipping and any row is bad (the first one is named).
        """
        where = np.flatnonzero(bad)
        if not len(where):
            return np.ones(len(bad), dtype=bool)
        if not self.skip:
            reason = describe(int(where[0]))
            if len(where) > 1:
                reason += f" (and {len(where) - 1} more such rows)"
            raise TraceError(self.file, reason, row=int(rows[where[0]]), column=column,
                             header_lines=self.header_lines)
        key = f"{label} in '{column}'" if column else label
        self.skipped[key] = self.skipped.get(key, 0) + len(where)
        return ~np.asarray(bad, dtype=bool)

    def fail(self, reason: str, row: int | None = None, column: str | None = None) -> TraceError:
        """An error for a problem that cannot be skipped (raise it)."""
        return TraceError(self.file, reason, row=row, column=column, header_lines=self.header_lines)

    def summary(self, num_rows: int) -> list[str]:
        """The note that says how many rows were skipped and why (empty when none were)."""
        total = sum(self.skipped.values())
        if not total:
            return []
        reasons = "; ".join(f"{count} {key}" for key, count in self.skipped.items())
        return [f"{self.file}: skipped {total} of {num_rows} row(s) as asked (on_bad_rows: skip): {reasons}"]
