"""Durations in the unit they read best in (ms, s, min, h), for metrics and axes."""

from __future__ import annotations

import math

UNITS = (("ms", 1e-3), ("s", 1.0), ("min", 60.0), ("h", 3600.0))
SWITCH_AT = (1.0, 120.0, 7200.0)      # seconds from which s, min and h take over


def duration_unit(seconds: float) -> tuple[str, float]:
    """The unit for a duration of `seconds` (or for an axis whose largest value it is): ms below
    1 s, s below 2 min, min below 2 h, else h; with the unit's size in seconds."""
    index = sum(seconds >= limit for limit in SWITCH_AT) if math.isfinite(seconds) else 0
    return UNITS[index]


def duration_text(seconds: float) -> str:
    """A duration with about three significant digits in its unit: "52 ms", "1.05 s",
    "17.5 min"; "-" when there is none (NaN)."""
    if not math.isfinite(seconds):
        return "-"
    unit, size = duration_unit(seconds)
    value = seconds / size
    decimals = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:,.{decimals}f} {unit}"
