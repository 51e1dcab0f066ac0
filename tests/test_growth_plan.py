"""Fast-forward plans the KV blocks a decode run's members take two ways: in Python for runs of few
members (`planned_allocations`) and with numpy for larger ones (`growth_plan`). Both must name
the same blocks, or a run would free or allocate differently with its size."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.engine.run_growth import (
    MemberArrays,
    growth_limit,
    growth_plan,
    planned_allocations,
)

BLOCK = 16


def _members(draw_processed: list[int]) -> list[SimpleNamespace]:
    """Members holding exactly the blocks their processed tokens need (as a paged pool keeps them)."""
    return [SimpleNamespace(num_processed_tokens=p, num_blocks=-(-p // BLOCK)) for p in draw_processed]


def test_a_member_takes_a_block_when_its_next_token_outgrows_its_blocks():
    """One member holds 30 tokens in 2 blocks of 16: the iterations formed at 1, 2, 3 compute its
    tokens 31, 32, 33, and token 33 needs a 3rd block, so it takes blocks at formations 3 and
    3 + 16 = 19 (a run of 25 iterations; it has 40 left). A second member holds 16 tokens in 1
    block: it takes one at formation 1 (token 17) and would at 17, but has only 10 left."""
    promise = SimpleNamespace(growth="paged", block_size=BLOCK, lead=0)
    members = _members([30, 16])
    assert planned_allocations(promise, members, [40, 10], 25) == [(1, 1), (3, 0), (19, 0)]
    formations, who, counts = growth_plan(promise, members, [40, 10], 25)
    assert formations.tolist() == [3, 19, 1] and who.tolist() == [0, 0, 1] and counts.tolist() == [2, 1]
    # (the same run applied to a counting pool: tests/test_run_counting.py)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["paged", "per_token"]),
       st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 900)), min_size=1, max_size=40),
       st.integers(1, 1000))
def test_numpy_and_python_plans_name_the_same_blocks(growth, members, iterations):
    promise = SimpleNamespace(growth=growth, block_size=BLOCK, lead=0)
    requests = _members([processed for processed, _ in members])
    remaining = [left for _, left in members]
    formations, who, counts = growth_plan(promise, requests, remaining, iterations)
    order = np.lexsort((who, formations))
    expected = planned_allocations(promise, requests, remaining, iterations)
    assert list(zip(formations[order].tolist(), who[order].tolist())) == expected
    assert counts.tolist() == [sum(1 for _, m in expected if m == i) for i in range(len(requests))]


def _spare_reference(free, requests, remaining, limit):
    """growth_limit by brute force: the first slot j in 1..limit-1 whose formation would find no
    spare block (free, plus what members finished by j held and grew, less every block taken
    at formations 1..j), else limit."""
    promise = SimpleNamespace(growth="paged", block_size=BLOCK, lead=0)
    plan = planned_allocations(promise, requests, remaining, limit)
    for j in range(1, limit):
        taken = sum(1 for formation, _ in plan if formation <= j)
        freed = sum(request.num_blocks + sum(1 for _, who in plan if who == m)
                    for m, (request, left) in enumerate(zip(requests, remaining)) if left <= j)
        if free + freed - taken < 1:
            return j
    return limit


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 300)), min_size=1, max_size=24),
       st.integers(1, 200), st.integers(2, 300))
def test_growth_limit_with_and_without_the_members_arrays(members, free, limit):
    """The run's limit is the same whether the members' figures were read into arrays when the
    run started (`MemberArrays`, which also lets a count of every block the members could take
    settle it early) or are read from the requests, and equals a brute-force count."""
    promise = SimpleNamespace(growth="paged", block_size=BLOCK, lead=0, frees_on_completion=True, counts_frees=True)
    requests = _members([processed for processed, _ in members])
    remaining = [left for _, left in members]
    arrays = MemberArrays.of(promise, requests, remaining)
    expected = _spare_reference(free, requests, remaining, limit)
    assert growth_limit(promise, free, requests, remaining, limit, arrays) == expected
    assert growth_limit(promise, free, requests, remaining, limit) == expected
