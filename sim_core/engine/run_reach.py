"""How far a decode run is planned when it starts: to about the next arrival.

A request routed to a replica cuts its run at the first iteration ending at or after its arrival
(`FastForward.on_request_routed`), so the iterations a run prices past the next arrival are
mostly priced for nothing: on a busy replica runs are cut a few iterations after they start
(the 16,800-request vLLM replay of `docs/performance.md` priced 260,000 iterations for 80,000
that ran, at the cost model's per-iteration price). `RunReach` caps the first chunk a run plans
at the iterations that fit before the next pre-created arrival (with R replicas, the R-th next:
arrivals spread over them), at the replica's last run's mean iteration time, with a margin.
A run that gets further (the arrival went to another replica, a session's turn is not
pre-created, the estimate fell short) is extended as any other (`FastForward.on_extend`).
Only how much is priced up front changes, never an end time: a run's ends are sequential sums
from its start however its iterations are chunked.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

MIN_REACH = 4   # iterations planned at least (two are the shortest run)


def reach_iterations(gap: float, step: float) -> int:
    """Iterations to plan when the next arrival is `gap` seconds away and an iteration takes
    about `step` seconds: those that fit, an eighth more and two (the cut iteration, and an
    iteration somewhat shorter than the estimate), at least MIN_REACH."""
    fit = int(gap / step)
    return max(MIN_REACH, fit + fit // 8 + 2)


class RunReach:
    """The pre-created arrivals after an instant, and each replica's last mean iteration time."""

    def __init__(self, arrival_times: Sequence[float], num_replicas: int) -> None:
        self._times = arrival_times   # sorted (the kernel's arrival stream)
        self._ahead = num_replicas - 1   # arrivals skipped: on average the others' share
        self._step: dict[int, float] = {}   # replica -> mean seconds per iteration of its last run

    def note_run(self, replica: int, started_at: float, last_end: float, num_iterations: int) -> None:
        """A run on `replica` ran `num_iterations` iterations from `started_at` to `last_end`."""
        if num_iterations > 0 and last_end > started_at:
            self._step[replica] = (last_end - started_at) / num_iterations

    def cap(self, replica: int, now: float, chunk: int) -> int:
        """`chunk` (iterations a run starting now would plan), cut to about the next arrival's
        reach; unchanged before the replica's first run ended or past the last arrivals."""
        step = self._step.get(replica)
        if step is None:
            return chunk
        index = bisect_right(self._times, now) + self._ahead
        if index >= len(self._times):
            return chunk
        return min(chunk, reach_iterations(self._times[index] - now, step))
