"""Seeded arrival processes: times in seconds, starting at 0, non-decreasing.

bursty and diurnal are Poisson processes with a periodic rate lambda(t): unit-rate Poisson
points E_k are mapped through the inverse of the cumulative rate Lambda(t) (time change), which
is exact for bursty (piecewise constant) and tabulated on a fine grid for diurnal.
"""

from __future__ import annotations

import numpy as np

from sim_core import portable_math as portable
from sim_core.config.arrival import (
    ArrivalConfig,
    BurstyArrivalConfig,
    ConstantArrivalConfig,
    DiurnalArrivalConfig,
    GammaArrivalConfig,
    ReplayArrivalConfig,
    StaticArrivalConfig,
)
from sim_core.errors import ConfigError

GRID_POINTS = 8192  # per diurnal period


def generate_arrivals(config: ArrivalConfig, num_requests: int, rng: np.random.Generator,
                      replayed: np.ndarray | None = None) -> np.ndarray:
    """Arrival times for `num_requests` requests; `replayed` holds a trace's times (replay)."""
    if isinstance(config, StaticArrivalConfig):
        return np.zeros(num_requests)
    if isinstance(config, ConstantArrivalConfig):
        return np.arange(num_requests) / config.qps     # evenly spaced, the first at 0
    if isinstance(config, ReplayArrivalConfig):
        return _replay(config, num_requests, replayed)
    if isinstance(config, (BurstyArrivalConfig, DiurnalArrivalConfig)):
        points = np.concatenate(([0.0], np.cumsum(rng.exponential(1.0, num_requests - 1))))
        return _bursty(config, points) if isinstance(config, BurstyArrivalConfig) else _diurnal(config, points)
    if isinstance(config, GammaArrivalConfig):
        gaps = _gamma_gaps(config, num_requests, rng)
    else:   # poisson
        gaps = rng.exponential(1.0 / config.qps, num_requests)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def _gamma_gaps(config: GammaArrivalConfig, num_requests: int, rng: np.random.Generator) -> np.ndarray:
    """Gamma gaps with mean 1/qps and coefficient of variation cv. A cv so small that 1/cv**2
    overflows means constant gaps (the limit); a rate so small that the scale overflows gives
    infinite gaps, which the build's horizon check refuses."""
    variance = config.cv**2
    shape = 1.0 / variance if variance > 0.0 else np.inf
    if shape == np.inf:
        return np.full(num_requests, 1.0 / config.qps)
    rate = config.qps * shape
    return rng.gamma(shape, 1.0 / rate if rate > 0 else np.inf, num_requests)


def mean_rate(config: ArrivalConfig) -> float:
    """The long-run arrival rate of the process, requests per second."""
    if isinstance(config, BurstyArrivalConfig):
        return (config.qps * config.on_s + config.off_qps * config.off_s) / (config.on_s + config.off_s)
    if isinstance(config, DiurnalArrivalConfig) and config.rate_curve:
        return float(np.mean(config.rate_curve))
    return config.qps


def _bursty(config: BurstyArrivalConfig, points: np.ndarray) -> np.ndarray:
    """Rate qps during [0, on_s), off_qps during [on_s, on_s + off_s), repeated."""
    on_work = config.qps * config.on_s
    cycle_work = on_work + config.off_qps * config.off_s
    cycles, rest = np.divmod(points, cycle_work)
    in_off = rest >= on_work
    within = np.where(in_off, config.on_s + (rest - on_work) / max(config.off_qps, 1e-300), rest / config.qps)
    return cycles * (config.on_s + config.off_s) + within


def _diurnal(config: DiurnalArrivalConfig, points: np.ndarray) -> np.ndarray:
    grid = np.linspace(0.0, config.period_s, GRID_POINTS + 1)
    rate = diurnal_rate(config, grid)
    work = np.concatenate(([0.0], np.cumsum((rate[1:] + rate[:-1]) * 0.5 * np.diff(grid))))
    cycles, rest = np.divmod(points, work[-1])
    return cycles * config.period_s + np.interp(rest, work, grid)


def diurnal_rate(config: DiurnalArrivalConfig, times: np.ndarray) -> np.ndarray:
    """The diurnal rate curve (req/s) at `times` (seconds)."""
    phase = np.mod(times, config.period_s) / config.period_s
    if config.rate_curve:
        knots = np.asarray(config.rate_curve + config.rate_curve[:1], dtype=np.float64)
        return np.interp(phase * (len(knots) - 1), np.arange(len(knots)), knots)
    return config.qps * (1.0 + config.amplitude * portable.sin(2 * np.pi * phase))


def _replay(config: ReplayArrivalConfig, num_requests: int, replayed: np.ndarray | None) -> np.ndarray:
    assert replayed is not None, "replay needs the trace's arrival times"
    if len(replayed) < num_requests:
        raise ConfigError(f"workload.arrival.trace_file: {config.trace_file} has {len(replayed)} arrivals, "
                          f"fewer than the {num_requests} needed")
    return np.asarray(replayed[:num_requests], dtype=np.float64)
