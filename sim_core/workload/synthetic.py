"""Seeded synthetic request generators: arrival processes and length distributions."""

from __future__ import annotations

import numpy as np

from sim_core.config.workload import ArrivalConfig, LengthConfig

MAX_ZIPF_SUPPORT = 10_000_000


def generate_arrivals(config: ArrivalConfig, num_requests: int, rng: np.random.Generator) -> np.ndarray:
    """Arrival times in seconds, starting at 0, non-decreasing."""
    if config.process == "static":
        return np.zeros(num_requests)
    if config.process == "poisson":
        gaps = rng.exponential(1.0 / config.qps, num_requests)
    else:
        shape = 1.0 / config.cv**2
        gaps = rng.gamma(shape, 1.0 / (config.qps * shape), num_requests)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def generate_lengths(config: LengthConfig, num_requests: int, rng: np.random.Generator) -> np.ndarray:
    """Token counts (int64, >= 1) drawn from the configured distribution."""
    if config.distribution == "fixed":
        return np.full(num_requests, config.value, dtype=np.int64)
    if config.distribution == "uniform":
        return rng.integers(config.min, config.max + 1, num_requests, dtype=np.int64)
    support = np.arange(config.min, min(config.max, config.min + MAX_ZIPF_SUPPORT - 1) + 1, dtype=np.int64)
    weights = (support - config.min + 1.0) ** -config.theta
    cdf = np.cumsum(weights / weights.sum())
    return support[np.minimum(np.searchsorted(cdf, rng.random(num_requests)), len(support) - 1)]
