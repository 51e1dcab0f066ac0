"""Checks that generated, scaled or transformed workloads stay within the limits of
`sim_core/config/limits.py`, naming the knob that pushed them out (trace rows are checked, by
row, as they are read: see rows.py)."""

from __future__ import annotations

import numpy as np

from sim_core.config.limits import HORIZON_S, MAX_TOKENS
from sim_core.errors import ConfigError


def check_horizon(times: np.ndarray, what: str, remedy: str) -> None:
    """Refuse arrival times past HORIZON_S (or not finite); `what` starts with the field that
    put them there.

    Raises:
        ConfigError: '<what> reach <latest> s, past the horizon ...; <remedy>'.
    """
    beyond = ~(times <= HORIZON_S)   # NaN too
    if beyond.any():
        numbers = times[~np.isnan(times)]   # NaN comes from inf x 0: show the inf next to it
        latest = numbers.max() if len(numbers) else np.nan
        raise ConfigError(f"{what} reach {latest:.3g} s, past the {HORIZON_S:g} s horizon of simulated time; "
                          f"{remedy}")


def check_tokens(tokens: np.ndarray, what: str) -> None:
    """Refuse token counts over MAX_TOKENS; `what` starts with the field that made them.

    Raises:
        ConfigError: '<what> has <count> tokens, over the limit ...'.
    """
    if len(tokens) and tokens.max() > MAX_TOKENS:
        raise ConfigError(f"{what} has {int(tokens.max())} tokens, over the limit of {MAX_TOKENS} tokens per request")
