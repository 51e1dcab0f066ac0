"""User-facing errors of the simulation core.

Every error raised for bad input is a `SimCoreError` whose `str()` is one line that names
where the problem is (file, row, column, or config field) and why. The CLI and the app show
that line and nothing else; any other exception is a bug in the core.
"""

from __future__ import annotations


class SimCoreError(Exception):
    """Base class: a problem with the user's input, explained in one line."""


class ConfigError(SimCoreError):
    """A scenario file or config value is invalid."""


class TraceError(SimCoreError):
    """A trace file cannot be read; names file, row (1-based data row), column and reason.

    `header_lines` is how many lines precede row 1 (1 for CSV, 0 for JSON lines)."""

    def __init__(self, file: str, reason: str, row: int | None = None, column: str | None = None,
                 header_lines: int = 1):
        self.file, self.reason, self.row, self.column = file, reason, row, column
        where = [file]
        if row is not None:
            where.append(f"row {row} (line {row + header_lines})")
        if column is not None:
            where.append(f"column '{column}'")
        super().__init__(f"{', '.join(where)}: {reason}")


class SimulationError(SimCoreError):
    """The simulated system reached a state its policy cannot handle (e.g. LightLLM OOM)."""
