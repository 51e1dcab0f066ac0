"""Thin long series before they go to the browser, keeping what a reader must not miss."""

from __future__ import annotations

import numpy as np


def step_peaks(times: np.ndarray, values: np.ndarray, max_points: int = 1500) -> tuple[np.ndarray, np.ndarray]:
    """A step series with at most `max_points` points: time is cut into equal bins and each bin
    keeps its largest value (peaks survive; short dips may not). Short series pass unchanged."""
    times, values = np.asarray(times, dtype=np.float64), np.asarray(values)
    if len(times) <= max_points:
        return times, values
    edges = np.linspace(times[0], times[-1], max_points + 1)
    starts = np.unique(np.searchsorted(times, edges[:-1], side="left"))
    starts = starts[starts < len(times)]
    return times[starts], np.maximum.reduceat(values, starts)


def close_runs(lanes: np.ndarray, starts: np.ndarray, ends: np.ndarray, min_gap: float) -> np.ndarray:
    """Run label (0, 1, ...) of each bar of a Gantt chart: bars sorted by lane, then start, and
    not overlapping on a lane (a pipeline stage runs one batch at a time). A bar joins the run of
    the bar before it when it is on the same lane and starts less than `min_gap` after that bar
    ends (at the chart's width such a gap is under a pixel); otherwise it starts a new run."""
    lanes, starts, ends = np.asarray(lanes), np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64)
    new = np.ones(len(starts), dtype=bool)
    new[1:] = (lanes[1:] != lanes[:-1]) | (starts[1:] - ends[:-1] >= min_gap)
    return np.cumsum(new) - 1
