"""Per-operator regression on profile rows: outlier cleaning, estimators, held-out error.

Models learn log(time) from the operator's features, so errors are relative (what MAPE
measures) and the predictions stay positive. Two estimators:

* `random_forest`: an ensemble of regression trees on the raw features; exact inside the
  profiled range, flat outside it (the grids extrapolate linearly, see learned.py).
* `polynomial`: a degree-5 polynomial of log(1 + feature), least squares; smooth, so it cannot
  follow the steps that tile quantization and kernel selection put in measured GEMM times
  (held-out MAPE 3-9% per operator on real profiles, where the forest gets 1-4%).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, PolynomialFeatures

ESTIMATORS = ("random_forest", "polynomial")
HOLDOUT_FRACTION = 0.2
OUTLIER_FACTOR = 4.0   # a row 4x off the median of its neighbours is a measurement glitch
NEIGHBOURS = 15


def clean(frame: pd.DataFrame, features: tuple[str, ...]) -> tuple[pd.DataFrame, int]:
    """Drop glitched rows (profilers sometimes record a kernel that never ran, ~2 us, or one
    stalled by something else). Along the first feature, within groups of equal other features,
    times grow: a row below 1/OUTLIER_FACTOR of the largest time already kept at a smaller or
    equal feature, or above OUTLIER_FACTOR x the rolling median of its neighbours, is dropped.

    Returns the kept rows and how many were dropped.
    """
    order = frame.sort_values(list(features[1:]) + [features[0]], kind="stable")
    keys = [order[f].to_numpy() for f in features[1:]]
    times = order["time_s"].to_numpy()
    keep = np.ones(len(order), dtype=bool)
    start = 0
    for end in [*_group_ends(keys, len(order)), len(order)]:
        keep[start:end] = _keep_in_group(times[start:end])
        start = end
    return order[keep].sort_index(), int((~keep).sum())


def _group_ends(keys: list[np.ndarray], size: int) -> list[int]:
    if not keys or size == 0:
        return []
    change = np.zeros(size - 1, dtype=bool)
    for key in keys:
        change |= key[1:] != key[:-1]
    return (np.flatnonzero(change) + 1).tolist()


def _keep_in_group(times: np.ndarray) -> np.ndarray:
    median = pd.Series(times).rolling(NEIGHBOURS, center=True, min_periods=1).median().to_numpy()
    keep = (times > 0) & (times < OUTLIER_FACTOR * median)
    largest = 0.0
    for i, value in enumerate(times):
        if keep[i] and value * OUTLIER_FACTOR < largest:
            keep[i] = False
        elif keep[i]:
            largest = max(largest, value)
    return keep


def make_estimator(kind: str) -> RandomForestRegressor | Pipeline:
    """A fresh, unfitted estimator of log(time) for `kind` (random_forest | polynomial)."""
    if kind == "random_forest":
        return RandomForestRegressor(n_estimators=40, min_samples_leaf=1, random_state=0, n_jobs=1)
    if kind == "polynomial":
        return make_pipeline(FunctionTransformer(np.log1p), PolynomialFeatures(degree=5), LinearRegression())
    raise ValueError(f"unknown estimator {kind!r}; allowed: {', '.join(ESTIMATORS)}")


def fit_operator(frame: pd.DataFrame, features: tuple[str, ...], kind: str) -> Callable[[np.ndarray], np.ndarray]:
    """Fit an estimator of seconds from `features` on the rows of `frame`; returns a function
    mapping a 2-D feature array to seconds."""
    model = make_estimator(kind)
    model.fit(frame[list(features)].to_numpy(dtype=np.float64), np.log(frame["time_s"].to_numpy()))
    return lambda x: np.exp(model.predict(np.asarray(x, dtype=np.float64)))


def split(frame: pd.DataFrame, fraction: float = HOLDOUT_FRACTION,
          seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A seeded random split into (training rows, held-out rows)."""
    held = np.random.default_rng(seed).random(len(frame)) < fraction
    return frame[~held], frame[held]


def mape(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Mean absolute percentage error, in percent."""
    return float(np.mean(np.abs(predicted - measured) / measured) * 100)


def holdout_errors(frame: pd.DataFrame, features: tuple[str, ...], kind: str) -> np.ndarray:
    """Absolute percentage errors on held-out rows of a model trained on the others (empty
    when there are too few rows to split)."""
    train, test = split(frame)
    if len(test) == 0 or len(train) < 2:
        return np.empty(0)
    predict = fit_operator(train, features, kind)
    measured = test["time_s"].to_numpy()
    return np.abs(predict(test[list(features)].to_numpy()) - measured) / measured * 100
