"""User-facing errors of the simulation core.

Every error raised for bad input is a `SimCoreError` whose `str()` is one line that names
where the problem is (file, row, column, or config field) and why. The CLI and the app show
that line and nothing else; any other exception is a bug in the core. An input value echoed
in a message is cut to about 200 characters (`shown`, `clipped`).
"""

from __future__ import annotations

MAX_MESSAGE = 2000     # characters of a whole message, a backstop behind the per-value cuts


class SimCoreError(Exception):
    """Base class: a problem with the user's input, explained in one line.

    The line is guaranteed: line breaks and other unprintable characters that came from the
    input are escaped, and a message longer than MAX_MESSAGE is cut."""

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str):
            args = (clipped(args[0], MAX_MESSAGE), *args[1:])
        super().__init__(*args)


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


MAX_SHOWN = 200        # characters of any input value echoed in a message
_MAX_REPR_BITS = 14_000  # ints up to ~4,200 digits have a repr (Python refuses more than 4,300)


def shown(value: object, limit: int = MAX_SHOWN) -> str:
    """`repr(value)`, cut to at most `limit` characters ('...' marks the cut).

    Built piecewise, so a huge value is never expanded: a list that aliases made a billion
    elements long, a value nested a thousand levels deep, an integer of 5,000 digits (shown
    as its size) all cost about `limit` characters of work.
    """
    text = _bounded_repr(value, limit + 1, depth=4)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clipped(text: str, limit: int = MAX_SHOWN) -> str:
    """`text` on one line (unprintable characters escaped as repr() does) and cut to at most
    `limit` characters ('...' marks the cut)."""
    text = text[: limit + 1]
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _bounded_repr(value: object, budget: int, depth: int) -> str:
    if isinstance(value, str):
        return repr(value if len(value) <= budget else value[:budget])
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_REPR_BITS:
        return f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
    if isinstance(value, (list, tuple, dict)):
        return _bounded_container(value, budget, depth)
    return repr(value)[:budget]


def _bounded_container(value: dict | tuple | list, budget: int, depth: int) -> str:
    opening, closing = ("{", "}") if isinstance(value, dict) else ("(", ")") if isinstance(value, tuple) else ("[", "]")
    if depth == 0:
        return f"{opening}...{closing}"
    parts, used = [], 1
    for item in (value.items() if isinstance(value, dict) else value):
        if used > budget:
            parts.append("...")
            break
        if isinstance(value, dict):
            part = f"{_bounded_repr(item[0], budget, depth - 1)}: {_bounded_repr(item[1], budget, depth - 1)}"
        else:
            part = _bounded_repr(item, budget, depth - 1)
        parts.append(part)
        used += len(part) + 2
    single = "," if isinstance(value, tuple) and len(value) == 1 else ""
    return opening + ", ".join(parts) + single + closing
