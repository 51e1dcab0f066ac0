"""Bounded message text: a value that came from input is echoed in at most a few hundred
characters, and a message is one line, however large the input was."""

from __future__ import annotations

VALUE_LIMIT = 200      # characters of one echoed value
LINE_LIMIT = 2_000     # characters of one printed message line
ELLIPSIS = "…"


def shorten(value: object, limit: int = VALUE_LIMIT) -> str:
    """`str(value)` cut to `limit` characters (the last one an ellipsis when cut)."""
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def one_line(text: object, limit: int = LINE_LIMIT) -> str:
    """`text` with its line breaks (and other control characters) as spaces, cut to `limit`."""
    flat = "".join(" " if ch < " " or ch == "\x7f" else ch for ch in shorten(text, limit + 1))
    return shorten(flat, limit)
