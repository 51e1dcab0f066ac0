"""Parsing the JSON files of measured runs with one-line errors naming the file."""

from __future__ import annotations

import json
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
