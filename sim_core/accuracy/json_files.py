"""Parsing the JSON (and YAML) files of measured runs with one-line errors naming the file."""

from __future__ import annotations

import json
import math
from typing import Any

from sim_core.errors import ConfigError


def json_object(where: str, raw: bytes | str, expected: str = "a JSON object") -> dict[str, Any]:
    """The JSON object in `raw`; a ConfigError naming `where` (a file, or a file and line) when it
    is not valid JSON or not an object."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:   # also: too deep, an integer over Python's digit limit
        raise ConfigError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected {expected}")
    return data


def number(mapping: Any, key: str, where: str, minimum: float | None = None) -> float:
    """`mapping[key]` as a finite number (at least `minimum` when given); a ConfigError naming
    `where` and the field otherwise (a missing field, or a mapping that is not one, included)."""
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where}: field {key!r}: expected a number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{where}: field {key!r}: expected at least {minimum:g}, got {value!r}")
    return float(value)
