"""A decode run's members gain their tokens in one step (`advance_tokens`): each
member's token count, last token time, widest gap and completion, and the token gaps recorded,
are what the stepwise batch ends would have made.

The run: iterations 0..3 end at 1.0, 1.25, 1.75 and 2.0 s (gaps between them 0.25, 0.5, 0.25;
binary fractions, so every figure below is exact). Three members, in batch order:

* A: 5 iterations left (it outlives the run), last token at 0.25 s, widest gap so far 0.05:
  its first gap in the run, 1.0 - 0.25 = 0.75, is its widest;
* B: 2 iterations left (its last token is iteration 1's, at 1.25 s), last token at 0.75 s,
  widest gap so far 0.3: its gaps in the run are 0.25 and 0.25, so 0.3 stays;
* C: 4 iterations left (its last token is iteration 3's), last token at 0.875 s: first gap
  0.125, then 0.25, 0.5 (and 0.25): widest 0.5.
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim_core.engine.run_members import advance_tokens
from sim_core.entities import Request
from sim_core.results.record import Recorder

ENDS = np.array([1.0, 1.25, 1.75, 2.0])
REMAINING = [5, 2, 4]


def members() -> list[Request]:
    """A, B and C decoding (prompt of 8 tokens, 8 processed plus the first output token)."""
    out = []
    for rid, (left, last_token_at, widest) in enumerate([(5, 0.25, 0.05), (2, 0.75, 0.3), (4, 0.875, 0.0)]):
        request = Request(rid, 0.0, 8, left + 1)   # total 9 + left, 9 processed: `left` to go
        request.num_processed_tokens, request.is_prefill_complete = 9, True
        request.last_token_at, request.max_token_gap = last_token_at, widest
        out.append(request)
    return out


def advance(through: bool) -> tuple[list[Request], list[tuple[float, int]]]:
    """Apply the run; returns the members and the recorded gaps as sorted (gap, count) pairs."""
    requests, recorder = members(), Recorder("requests", 1)
    advance_tokens(requests, REMAINING, ENDS, recorder, np.sort(REMAINING), through)
    recorder.compact_gaps(force=True)
    values, counts = recorder.gaps
    return requests, sorted(zip(values.tolist(), counts.tolist()))


@pytest.mark.parametrize("through", [False, True])
def test_finished_member_stops_at_its_last_token(through):
    """B takes iterations 0 and 1 only: 2 tokens, its last at 1.25 s, finished then; its widest
    gap stays the 0.3 it had (its gaps in the run are 0.25 and 0.25)."""
    b = advance(through)[0][1]
    assert (b.num_processed_tokens, b.last_token_at, b.completed, b.completed_at) == (11, 1.25, True, 1.25)
    assert b.max_token_gap == 0.3


def test_skipped_iterations_without_the_last():
    """`through` False applies iterations 0..2: A and C gain 3 tokens each, their last at 1.75;
    C (4 left) is not finished yet. Widest: A its first gap 0.75, C the 0.5 into iteration 2.
    Recorded: the three first gaps (0.75, 0.25, 0.125), then 0.25 into iteration 1 for the 3
    members and 0.5 into iteration 2 for the 2 still live (B is done)."""
    (a, _, c), gaps = advance(through=False)
    assert (a.num_processed_tokens, a.last_token_at, a.max_token_gap, a.completed) == (12, 1.75, 0.75, False)
    assert (c.num_processed_tokens, c.last_token_at, c.max_token_gap, c.completed) == (12, 1.75, 0.5, False)
    assert gaps == [(0.125, 1), (0.25, 1), (0.25, 3), (0.5, 2), (0.75, 1)]


def test_through_the_last_iteration():
    """`through` True applies iteration 3 too: A and C gain 4 tokens, their last at 2.0; C's
    fourth is its last (finished at 2.0). The last iteration's gap (0.25) is recorded by the
    run's batch end, not here: the same gaps as without it."""
    (a, _, c), gaps = advance(through=True)
    assert (a.num_processed_tokens, a.last_token_at, a.max_token_gap, a.completed) == (13, 2.0, 0.75, False)
    assert (c.num_processed_tokens, c.last_token_at, c.max_token_gap, c.completed_at) == (13, 2.0, 0.5, 2.0)
    assert gaps == [(0.125, 1), (0.25, 1), (0.25, 3), (0.5, 2), (0.75, 1)]


def test_nobody_finishes_inside_the_applied_iterations():
    """Without B (A and C, 5 and 4 left) nobody's last token falls in iterations 0..2 (`through`
    False): both gain 3 tokens, their last at 1.75; A's widest is its first gap 0.75, C's the 0.5
    into iteration 2. Recorded: the first gaps 0.75 and 0.125, then 0.25 and 0.5 for both."""
    a, _, c = members()
    recorder = Recorder("requests", 1)
    advance_tokens([a, c], [5, 4], ENDS, recorder, np.array([4, 5]), False)
    recorder.compact_gaps(force=True)
    assert (a.num_processed_tokens, a.last_token_at, a.max_token_gap, a.completed) == (12, 1.75, 0.75, False)
    assert (c.num_processed_tokens, c.last_token_at, c.max_token_gap, c.completed) == (12, 1.75, 0.5, False)
    values, counts = recorder.gaps
    assert sorted(zip(values.tolist(), counts.tolist())) == [(0.125, 1), (0.25, 2), (0.5, 2), (0.75, 1)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.floats(0.0, 0.9), st.floats(0.0, 2.0)), min_size=1, max_size=8),
       st.lists(st.floats(0.001, 1.0), min_size=1, max_size=30), st.booleans())
def test_tokens_as_iteration_by_iteration(drawn, steps, through):
    """Members with any iterations left (so that some, all or none finish inside the run), the
    run's iterations of any length: each member's tokens, last token time, widest gap and
    completion, and the recorded gaps, are those of applying the iterations one by one."""
    ends = 1.0 + np.cumsum([0.0] + steps)
    k, last = len(ends), len(ends) - (1 if through else 2)
    assume(k >= 2)
    remaining = [left for left, _, _ in drawn]
    bulk, one_by_one = [], []
    for out in (bulk, one_by_one):
        for rid, (left, last_token_at, widest) in enumerate(drawn):
            request = Request(rid, 0.0, 8, left + 1)
            request.num_processed_tokens, request.is_prefill_complete = 9, True
            request.last_token_at, request.max_token_gap = last_token_at, widest
            out.append(request)
    recorder = Recorder("requests", 1)
    advance_tokens(bulk, remaining, ends, recorder, np.sort(remaining), through)
    recorder.compact_gaps(force=True)
    expected: list[float] = []
    for request, left in zip(one_by_one, remaining):
        for j in range(min(last, left - 1) + 1):
            gap = float(ends[j]) - request.last_token_at
            if j < k - 1:   # the last iteration's gaps are its batch end's
                expected.append(gap)
            request.on_decode_run(1, float(ends[j]), gap, j == left - 1)
    for a, b in zip(bulk, one_by_one):
        assert (a.num_processed_tokens, a.last_token_at, a.max_token_gap, a.completed, a.completed_at) == \
            (b.num_processed_tokens, b.last_token_at, b.max_token_gap, b.completed, b.completed_at)
    values, counts = recorder.gaps
    assert sorted(np.repeat(values, counts).tolist()) == sorted(expected)
