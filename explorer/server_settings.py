"""What whoever starts the server decides: limits, the upload quota, the Ray clusters it may join.

Read once per server process from environment variables (never from a link, an upload or a
widget), so a visitor cannot raise a limit or point the server at an address:

| variable | default | meaning |
|---|---|---|
| `SIM_EXPLORER_MAX_RUN_MB`, `..._MAX_RUN_S`, ... | see `sim_core.engine.budget.Limits.app` | the run budget |
| `SIM_EXPLORER_MAX_CONCURRENT_RUNS` | 2 | simulations running at once in this server |
| `SIM_EXPLORER_UPLOAD_QUOTA_MB` | 2048 | bytes the upload store keeps |
| `SIM_EXPLORER_UPLOAD_MAX_AGE_H` | 24 | hours an unused upload is kept |
| `SIM_EXPLORER_MAX_SWEEP_JOBS` | 4 | capacity sweeps running at once in this server |
| `SIM_EXPLORER_SWEEP_WORKERS` | 2 | worker processes of one sweep on the local pool |
| `SIM_EXPLORER_RAY_ADDRESSES` | (none) | comma-separated `host:port` of Ray clusters the Capacity page may join |
| `SIM_EXPLORER_PROFILE_ROOTS` | (none) | `:`-separated folders in which `predictor.profiles_dir` may be |
| `SIM_EXPLORER_APPLY_ABOVE_S` | 1.0 | an edit whose run is estimated to take longer waits for Apply |

A malformed value stops the server at start with a message naming the variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from sim_core.engine.budget import Limits
from sim_core.errors import ConfigError

PREFIX = "SIM_EXPLORER_"


@dataclass(frozen=True)
class ServerSettings:
    limits: Limits = field(default_factory=Limits.app)
    max_concurrent_runs: int = 2
    upload_quota_mb: float = 2048.0
    upload_max_age_h: float = 24.0
    max_sweep_jobs: int = 4
    sweep_workers: int = 2
    ray_addresses: tuple[str, ...] = ()
    profile_roots: tuple[str, ...] = ()
    apply_above_s: float = 1.0

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> ServerSettings:
        """The settings in `environ` (default: os.environ); ConfigError names a malformed variable."""
        env = os.environ if environ is None else environ
        return cls(
            limits=Limits.app(env),
            max_concurrent_runs=int(_number(env, "MAX_CONCURRENT_RUNS", cls.max_concurrent_runs, 1, 1024, True)),
            upload_quota_mb=_number(env, "UPLOAD_QUOTA_MB", cls.upload_quota_mb, 1, 1e7),
            upload_max_age_h=_number(env, "UPLOAD_MAX_AGE_H", cls.upload_max_age_h, 0.01, 1e5),
            max_sweep_jobs=int(_number(env, "MAX_SWEEP_JOBS", cls.max_sweep_jobs, 0, 1024, True)),
            sweep_workers=int(_number(env, "SWEEP_WORKERS", cls.sweep_workers, 1, 1024, True)),
            ray_addresses=_addresses(env.get(PREFIX + "RAY_ADDRESSES", "")),
            profile_roots=tuple(part for part in env.get(PREFIX + "PROFILE_ROOTS", "").split(os.pathsep) if part),
            apply_above_s=_number(env, "APPLY_ABOVE_S", cls.apply_above_s, 0.0, 1e6),
        )


def _number(env, name: str, default: float, low: float, high: float, integer: bool = False) -> float:
    text = env.get(PREFIX + name, "").strip()
    if not text:
        return default
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:      # also refuses NaN
        kind = "an integer" if integer else "a number"
        raise ConfigError(f"{PREFIX}{name}: {text[:40]!r} is not {kind} between {low:g} and {high:g}")
    return value


def _addresses(text: str) -> tuple[str, ...]:
    addresses = tuple(part.strip() for part in text.split(",") if part.strip())
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{PREFIX}RAY_ADDRESSES: {address[:80]!r} is not host:port")
    return addresses
