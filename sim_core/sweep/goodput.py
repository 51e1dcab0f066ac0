"""Goodput: the share of requests that meet every latency limit (SLO attainment, as DistServe
measures it), an alternative to percentile SLOs (`slo.attainment: 0.9`).

A limit named `{metric}_p{N}_s` bounds each request's own figure, whatever N: TTFT, e2e and
scheduling delay as they are, TBT as the request's mean time per output token (TPOT; a request
with one output token has none and meets it). A request that did not finish meets nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim_core.sweep.spec import ATTAINMENT

if TYPE_CHECKING:
    import pandas as pd

PER_REQUEST = {"ttft": "ttft", "tbt": "tpot", "e2e": "e2e", "scheduling_delay": "scheduling_delay"}


def request_limits(slo: dict[str, float]) -> dict[str, float]:
    """Per-request column -> its tightest limit, from the SLO's latency keys."""
    limits: dict[str, float] = {}
    for key, limit in slo.items():
        if key == ATTAINMENT:
            continue
        column = PER_REQUEST[key.rsplit("_p", 1)[0]]
        limits[column] = min(limit, limits.get(column, limit))
    return limits


def attainment(requests: pd.DataFrame, slo: dict[str, float]) -> float | None:
    """Share of `requests` (finished or not) meeting every limit of `slo` (None: no requests)."""
    if not len(requests):
        return None
    met = (requests["status"] == "finished").to_numpy().copy()
    for column, limit in request_limits(slo).items():
        values = requests[column].to_numpy(dtype=float)
        met &= (values <= limit) | (np.isnan(values) & (column == "tpot"))
    return float(met.mean())
