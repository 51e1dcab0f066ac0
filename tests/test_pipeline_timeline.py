"""A pipeline run's timeline (engine/pipeline_timeline.py), computed by hand.

Two micro-batches on two stages: A runs 0.25 s per stage, B 0.5 s (exact in binary, so every
instant below is exact). A starts on stage 0 at 0; B, formed at 0, queues behind it. A has 3
iterations (its final one is iteration 2), B 10. Stage by stage, first come first served:

    0.25  A0 leaves stage 0: B0 takes it [0.25, 0.75], A0 takes stage 1 [0.25, 0.5]
    0.5   A0 leaves stage 1: batch end, A1 formed, queues at stage 0 (B0 there)
    0.75  B0 leaves stage 0: A1 takes it [0.75, 1.0], B0 takes stage 1 [0.75, 1.25]
    1.0   A1 leaves stage 0, queues at stage 1 (B0 there)
    1.25  B0 leaves stage 1: batch end, B1 formed; A1 takes stage 1 [1.25, 1.5], B1 stage 0 [1.25, 1.75]
    1.5   A1 leaves stage 1: batch end, A2 formed, queues at stage 0
    1.75  B1 leaves stage 0: A2 takes it [1.75, 2.0], B1 takes stage 1 [1.75, 2.25]
    2.0   A2 leaves stage 0, queues at stage 1
    2.25  B1 leaves stage 1: batch end, B2 formed; A2 takes stage 1 [2.25, 2.5], B2 stage 0 [2.25, 2.75]
    2.5   A2, A's final iteration, leaves the last stage: the timeline stops there

So 9 executions are handled before 2.5, batches are formed at 0.5 (A), 1.25 (B), 1.5 (A), 2.25
(B), and at 2.5 A2 runs on stage 1 since 2.25 and B2 on stage 0 since 2.25, nothing queued.
"""

from __future__ import annotations

import math

import numpy as np

from sim_core.engine.pipeline_timeline import Lane, Timeline
from sim_core.entities import Batch, Request

EXECUTIONS = [   # lane, iteration, stage, start, end, in the order they end
    (0, 0, 0, 0.0, 0.25), (0, 0, 1, 0.25, 0.5), (1, 0, 0, 0.25, 0.75), (0, 1, 0, 0.75, 1.0),
    (1, 0, 1, 0.75, 1.25), (0, 1, 1, 1.25, 1.5), (1, 1, 0, 1.25, 1.75), (0, 2, 0, 1.75, 2.0),
    (1, 1, 1, 1.75, 2.25)]


def _timeline(keep: bool) -> Timeline:
    def lane(iterations: int, seconds: float) -> Lane:
        batch = Batch(0, 0, [Request(0, 0.0, 4, iterations)], [1])
        return Lane(batch, [iterations], np.array([iterations]), None, [[seconds] * iterations] * 2)
    a, b = lane(3, 0.25), lane(10, 0.5)
    return Timeline([a, b], [(0, a.first, 0.0)], 0.0, 2, keep)


def test_two_micro_batches_of_different_stage_times():
    """The whole timeline in one go, with every execution's row kept."""
    plan = _timeline(keep=True)
    plan.advance(math.inf, 100)
    assert plan.final and plan.end == 2.5 and plan.count == 9
    columns = plan.columns()
    assert list(zip(*(column.tolist() for column in columns))) == EXECUTIONS
    assert plan.formed_at == [0.5, 1.25, 1.5, 2.25] and plan.formed == [0, 1, 0, 1]
    assert plan.lanes_done == [[0.5, 1.5], [1.25, 2.25]]
    assert plan.running() == [(1, 2.25, 2.75), (0, 2.25, 2.5)] and not any(plan.queues)


def test_chunks_and_counting_only_give_the_same_timeline():
    """Four executions (ending at 0.25, 0.5, 0.75, 1.0) stop the first chunk before the next
    instant, 1.25; the second chunk goes on to A's final end. Without rows kept only the count
    is there; the formations and the state at 2.5 are the same."""
    plan = _timeline(keep=False)
    plan.advance(math.inf, 4)
    assert not plan.final and plan.end == 1.25 and plan.count == 4 and plan.formed_at == [0.5]
    plan.advance(math.inf, 100)
    assert plan.final and plan.end == 2.5 and plan.count == 9 and plan.rows is None
    assert plan.formed_at == [0.5, 1.25, 1.5, 2.25] and plan.formed == [0, 1, 0, 1]
    assert plan.running() == [(1, 2.25, 2.75), (0, 2.25, 2.5)]


def test_a_cut_stops_before_the_routing_instant():
    """Cut at 1.25 (say a request is routed then): the events before it are handled (4
    executions, the last ending at 1.0), the one at 1.25 (B0's batch end) is not: B0 still runs
    on stage 1 since 0.75 and A1 waits in stage 1's queue."""
    plan = _timeline(keep=True)
    plan.advance(1.25, 100)
    assert not plan.final and plan.end == 1.25 and plan.count == 4
    assert plan.running() == [None, (1, 0.75, 1.25)] and list(plan.queues[1]) == [0]
