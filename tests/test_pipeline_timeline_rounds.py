"""Two micro-batches on two stages: `Timeline._rounds` and `_sprint` (a round of two events at a time)
against the event loop alone (`_loop`, every event through the heap), on random stage times,
starting points, stops (`until`, budgets, a lane's final batch end) and chunkings (hypothesis):
every piece of state the run reads must be the same after each `advance`.

Stage times are drawn from quarters (exact, so ties between ends are common: a final
execution ending with another, a stop at an instant with several ends) and from arbitrary
floats (rounding in every addition)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.engine.pipeline_timeline import Lane, Timeline
from sim_core.entities import Batch, Request


class _LoopOnly(Timeline):
    """The reference: no rounds, the event loop handles every event."""

    def _sprint(self, until: float, budget: int, now: float) -> tuple[int, float]:
        return budget, now

    def _rounds(self, until: float, budget: int, now: float) -> tuple[int, float]:
        return budget, now


SECONDS = st.one_of(st.sampled_from([0.25, 0.5, 0.75, 1.0]),
                    st.floats(min_value=0.01, max_value=2.0, allow_nan=False, allow_infinity=False))


UNTIL = st.one_of(st.just(math.inf), st.floats(0.0, 40.0), st.integers(0, 80).map(lambda quarters: quarters / 4))


@st.composite
def _cases(draw: st.DrawFn) -> dict:
    iterations = [draw(st.integers(2, 12)), draw(st.integers(2, 12))]
    reach = max(iterations) + 3
    durations = [[[draw(SECONDS) for _ in range(reach)] for _ in range(2)] for _ in iterations]
    stage = draw(st.integers(0, 1))
    now = draw(st.sampled_from([0.0, 0.5, 1.0]))
    since = now - draw(st.sampled_from([0.0, 0.25, 0.5]))
    stops = draw(st.lists(st.tuples(UNTIL, st.integers(1, 20)),
                          min_size=1, max_size=6))
    return {"iterations": iterations, "durations": durations, "stage": stage, "now": now, "since": since,
            "stops": stops, "keep": draw(st.booleans())}


def _plan(kind: type[Timeline], case: dict) -> Timeline:
    lanes = []
    for m, (count, durations) in enumerate(zip(case["iterations"], case["durations"])):
        batch = Batch(m, 0, [Request(m, 0.0, 4, count)], [1])
        lanes.append(Lane(batch, [count], np.array([count]), None, durations))
    located: list[tuple[int, Batch, float | None]] = [(case["stage"], lanes[0].first, case["since"])]
    return kind(lanes, located, case["now"], 2, case["keep"])


def _state(plan: Timeline) -> tuple:
    return (sorted(plan.heap), plan.seq, list(plan.iteration), list(plan.started), list(plan.busy),
            [list(queue) for queue in plan.queues], plan.lanes_done, plan.rows, plan.count, plan.formed_at,
            plan.formed, plan.end, plan.final, plan.running())


@settings(max_examples=400, deadline=None)
@given(_cases())
def test_rounds_leave_the_state_the_event_loop_leaves(case: dict) -> None:
    fast, reference = _plan(Timeline, case), _plan(_LoopOnly, case)
    assert _state(fast) == _state(reference)
    for until, budget in case["stops"]:
        if reference.final:
            break
        fast.advance(until, budget)
        reference.advance(until, budget)
        assert _state(fast) == _state(reference)
    fast.advance(math.inf, 10_000)
    reference.advance(math.inf, 10_000)
    assert _state(fast) == _state(reference) and fast.final
