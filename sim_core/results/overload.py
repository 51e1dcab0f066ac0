"""Whether a run is over capacity: the waiting queue still growing when the last request arrives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

MIN_GROWTH = 20              # requests: a smaller rise in the queue is noise, not a trend
GROWTH_SHARE = 0.05          # ... nor a rise below this share of the run's requests


@dataclass(frozen=True)
class QueueTrend:
    """The waiting queue (all replicas) at the middle and at the end of the arrivals."""

    mid_s: float
    end_s: float
    waiting_mid: int
    waiting_end: int
    threshold: int           # the rise that counts as over capacity

    @property
    def growth_per_s(self) -> float:
        """How fast the queue grew over the second half of the arrivals (requests/s)."""
        return (self.waiting_end - self.waiting_mid) / max(self.end_s - self.mid_s, 1e-9)

    @property
    def over_capacity(self) -> bool:
        """Requests arrive faster than the cluster serves them: the queue rose by at least
        `threshold` while the second half of the requests arrived."""
        return self.waiting_end - self.waiting_mid >= self.threshold


def queue_trend(result: SimulationResult) -> QueueTrend:
    """The trend of the run's waiting queue over its arrivals."""
    arrivals = result.requests["arrived_at"].to_numpy(np.float64)
    return waiting_trend(result.timeseries, float(arrivals.min()) if len(arrivals) else 0.0,
                         float(arrivals.max()) if len(arrivals) else 0.0, len(arrivals))


def waiting_trend(timeseries: pd.DataFrame, first_s: float, last_s: float, num_requests: int) -> QueueTrend:
    """The trend from a time series (`time`, `replica_id`, `num_waiting` rows; each replica's
    queue holds its last value until its next row) between the middle of [first_s, last_s] and
    last_s."""
    mid_s = (first_s + last_s) / 2
    return QueueTrend(mid_s, last_s, _waiting_at(timeseries, mid_s), _waiting_at(timeseries, last_s),
                      max(MIN_GROWTH, int(np.ceil(GROWTH_SHARE * num_requests))))


def request_trend(requests: pd.DataFrame) -> QueueTrend:
    """The same trend from the request table alone (runs that kept no time series): at time t
    the queue holds the requests arrived by t and not yet scheduled (`scheduled_at` NaN or
    negative: never)."""
    arrivals = np.sort(requests["arrived_at"].to_numpy(np.float64))
    scheduled = requests["scheduled_at"].to_numpy(np.float64)
    scheduled = np.sort(np.where(np.isnan(scheduled) | (scheduled < 0), np.inf, scheduled))
    if not len(arrivals):
        return QueueTrend(0.0, 0.0, 0, 0, MIN_GROWTH)
    first, last = float(arrivals[0]), float(arrivals[-1])
    mid = (first + last) / 2

    def waiting(t: float) -> int:
        return int(np.searchsorted(arrivals, t, side="right") - np.searchsorted(scheduled, t, side="right"))

    threshold = max(MIN_GROWTH, int(np.ceil(GROWTH_SHARE * len(arrivals))))
    return QueueTrend(mid, last, waiting(mid), waiting(last), threshold)


def _waiting_at(timeseries: pd.DataFrame, time_s: float) -> int:
    total = 0
    for _, rows in timeseries.groupby("replica_id"):
        index = np.searchsorted(rows["time"].to_numpy(np.float64), time_s, side="right") - 1
        total += int(rows["num_waiting"].to_numpy()[index]) if index >= 0 else 0
    return total
