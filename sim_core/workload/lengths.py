"""Seeded token-length distributions (int64, >= 1)."""

from __future__ import annotations

import math

import numpy as np

from sim_core.config.lengths import (
    EmpiricalLengthConfig,
    FixedLengthConfig,
    LengthConfig,
    LognormalLengthConfig,
    UniformLengthConfig,
    ZipfLengthConfig,
)

MAX_ZIPF_SUPPORT = 10_000_000


def generate_lengths(config: LengthConfig, num_requests: int, rng: np.random.Generator,
                     observed: np.ndarray | None = None) -> np.ndarray:
    """Token counts drawn from the configured distribution; `observed` holds the lengths to
    resample for `empirical`."""
    if isinstance(config, FixedLengthConfig):
        return np.full(num_requests, config.value, dtype=np.int64)
    if isinstance(config, UniformLengthConfig):
        return rng.integers(config.min, config.max + 1, num_requests, dtype=np.int64)
    if isinstance(config, LognormalLengthConfig):
        mu = math.log(config.mean) - config.sigma**2 / 2.0   # so that the mean is config.mean
        drawn = np.rint(rng.lognormal(mu, config.sigma, num_requests))
        return np.clip(drawn, config.min, config.max).astype(np.int64)
    if isinstance(config, EmpiricalLengthConfig):
        assert observed is not None and len(observed), "empirical needs observed lengths"
        return np.asarray(observed, dtype=np.int64)[rng.integers(0, len(observed), num_requests)]
    assert isinstance(config, ZipfLengthConfig), f"unknown distribution {config.distribution}"
    return _zipf(config, num_requests, rng)


def _zipf(config: ZipfLengthConfig, num_requests: int, rng: np.random.Generator) -> np.ndarray:
    support = np.arange(config.min, min(config.max, config.min + MAX_ZIPF_SUPPORT - 1) + 1, dtype=np.int64)
    weights = (support - config.min + 1.0) ** -config.theta
    cdf = np.cumsum(weights / weights.sum())
    return support[np.minimum(np.searchsorted(cdf, rng.random(num_requests)), len(support) - 1)]
