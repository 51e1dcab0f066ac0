"""A trace shorter than a probe, replayed by resampling its rows (seeded), not by stretching."""

from __future__ import annotations

import numpy as np

from sim_core.workload.model import Workload


def resample_rows(workload: Workload, num_requests: int, seed: int) -> Workload:
    """`num_requests` rows drawn with replacement from `workload` (its request sizes and optional
    columns; sessions are dropped, their turns would no longer follow each other), arriving after
    gaps drawn with replacement from its inter-arrival gaps, so the mean rate is the trace's."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(len(workload), size=num_requests)
    gaps = np.diff(workload.arrived_at)
    drawn = gaps[rng.integers(len(gaps), size=num_requests - 1)] if len(gaps) else np.zeros(num_requests - 1)
    arrived = float(workload.arrived_at[0]) + np.concatenate(([0.0], np.cumsum(drawn)))
    note = f"{len(workload)} trace rows resampled (seed {seed}) to {num_requests} requests"
    return workload.take(rows, arrived_at=arrived, session_id=None, turn=None).with_notes(note)
