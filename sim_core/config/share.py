"""A scenario as a short URL-safe string (compressed JSON), so a link reproduces a view."""

from __future__ import annotations

import base64
import binascii
import json
import zlib

from sim_core.config.documents import DocumentError, parse_json
from sim_core.config.loading import MAX_SCENARIO_BYTES
from sim_core.errors import ConfigError


def encode_scenario(scenario: dict) -> str:
    """Canonical JSON, deflated, base64url without padding."""
    text = json.dumps(scenario, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(text, 9)).decode().rstrip("=")


def decode_scenario(token: str) -> dict:
    """The scenario mapping inside a token made by encode_scenario (not yet validated).

    Raises:
        ConfigError: the token is not one (truncated link, edited by hand, too large).
    """
    try:
        packed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        inflater = zlib.decompressobj()
        text = inflater.decompress(packed, MAX_SCENARIO_BYTES)
        if inflater.unconsumed_tail:
            raise ConfigError(f"scenario link: larger than {MAX_SCENARIO_BYTES} bytes")
        if not inflater.eof:
            raise ValueError("incomplete data")
        data = parse_json(text.decode("utf-8"))
    except DocumentError as exc:
        raise ConfigError(f"scenario link: {exc.reason}") from None
    except (binascii.Error, ValueError, zlib.error) as exc:
        raise ConfigError(f"scenario link: not a scenario ({type(exc).__name__}); was the link cut short?") from None
    if not isinstance(data, dict):
        raise ConfigError("scenario link: not a scenario (the top level is not a mapping)")
    return data
