"""The most one run may cost (`Limits`): generous for the CLI, conservative for the app (each
overridable by an environment variable), or none; `BudgetError` is what a run over them raises."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sim_core.engine.cost_estimate import GIB, MIB
from sim_core.errors import SimCoreError


class BudgetError(SimCoreError):
    """The scenario would cost more than the limits allow (refused before anything is built)."""

APP_ENV = {   # Limits field -> (environment variable, unit factor) read by Limits.app()
    "max_peak_bytes": ("SIM_EXPLORER_MAX_RUN_MB", MIB),
    "max_requests": ("SIM_EXPLORER_MAX_REQUESTS", 1),
    "max_replicas": ("SIM_EXPLORER_MAX_REPLICAS", 1),
    "max_blocks_per_replica": ("SIM_EXPLORER_MAX_BLOCKS_PER_REPLICA", 1),
    "max_request_steps": ("SIM_EXPLORER_MAX_REQUEST_STEPS", 1),
    "max_trace_rows": ("SIM_EXPLORER_MAX_TRACE_ROWS", 1),
    "max_wall_s": ("SIM_EXPLORER_MAX_RUN_S", 1),
}
NO_LIMIT_WORDS = ("none", "off", "unlimited")


@dataclass(frozen=True)
class Limits:
    """The most one run may cost; None in a field means no limit on that figure.

    `max_wall_s` is the wall-clock limit of the simulation itself; `how_to_raise` ends every
    refusal message (who can raise a limit, and how; "{variable}" stands for the limit's
    environment variable in APP_ENV).
    """

    max_peak_bytes: int | None = None
    max_requests: int | None = None
    max_replicas: int | None = None
    max_blocks_per_replica: int | None = None
    max_request_steps: int | None = None
    max_trace_rows: int | None = None
    max_wall_s: float | None = None
    how_to_raise: str = "pass larger limits to run_simulation (limits=None: no limits)"

    def raise_hint(self, name: str) -> str:
        """How to raise the limit `name` (a field of Limits)."""
        return self.how_to_raise.replace("{variable}", APP_ENV[name][0])

    @classmethod
    def cli(cls) -> Limits:
        """Generous: a 16 GiB-class run on a 24 GB machine (20 million requests, 50 million trace
        rows); the CLI's --no-limits lifts it."""
        return cls(max_peak_bytes=16 * GIB, max_requests=20_000_000, max_trace_rows=50_000_000,
                   how_to_raise="run with --no-limits")

    @classmethod
    def app(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """Conservative, for a server shared through links: a 1 GiB-class run, 200,000 requests,
        10 million request steps (CPU time), 1 million trace rows, 4 Mi KV blocks per replica
        (the KV-cache map's arrays grow with it), 300 s of wall-clock time. Whoever starts the
        server overrides each with an environment variable (APP_ENV: e.g.
        SIM_EXPLORER_MAX_RUN_MB=4096; 'none' lifts that limit).

        Raises:
            BudgetError: a variable that is not a positive number or 'none'.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {"max_peak_bytes": GIB, "max_requests": 200_000, "max_replicas": None,
                  "max_blocks_per_replica": 4 * MIB, "max_request_steps": 10_000_000,
                  "max_trace_rows": 1_000_000, "max_wall_s": 300.0}
        for name, (variable, unit) in APP_ENV.items():
            text = environ.get(variable, "").strip()
            if text:
                values[name] = _env_limit(variable, text, unit, float if name == "max_wall_s" else int)
        return cls(**values, how_to_raise="whoever starts the server can raise {variable}")


def _env_limit(variable: str, text: str, unit: int, kind: Callable[[float], int | float]) -> int | float | None:
    if text.lower() in NO_LIMIT_WORDS:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise BudgetError(f"{variable}: '{text[:40]}' is not a positive number or 'none'")
    return kind(value * unit)
