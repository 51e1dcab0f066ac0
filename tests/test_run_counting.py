"""A decode run applied to a counting pool in bulk (`engine/run_counting.py`): the blocks each
member takes, the blocks finished members free, and per slot how many were taken and freed and
how many holders let go. `count_small` (Python, runs of few members) and `count_bulk` (numpy,
from the growth plan) must agree, or a run would leave the pool differently with its size.

The narrated run (as in tests/test_growth_plan.py): blocks of 16 tokens, a run of k = 25
iterations (slots 0..24). Member 0 holds 30 tokens in 2 blocks and has 40 iterations left: the
iterations formed at 1, 2, 3 compute its tokens 31, 32, 33, and token 33 needs a 3rd block, so it
takes blocks at formations 3 and 19 (it outlives the run). Member 1 holds 16 tokens in 1 block
and has 10 left: it takes a block at formation 1 (token 17), finishes after iteration 9 and frees
its 2 blocks at the formation after it, slot 10.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.engine.run_counting import count_bulk, count_small
from sim_core.engine.run_growth import MemberArrays, growth_plan
from sim_core.memory.block_pool import CountingBlockPool

BLOCK = 16


def _setup(held: list[tuple[int, int]], num_blocks: int = 100) -> tuple[CountingBlockPool, list[SimpleNamespace]]:
    """A counting pool and members holding (processed tokens, blocks) each, allocated from it."""
    pool = CountingBlockPool(num_blocks)
    members = []
    for processed, blocks in held:
        member = SimpleNamespace(num_processed_tokens=processed, num_blocks=0)
        pool.allocate(member, blocks)
        members.append(member)
    return pool, members


def _promise(growth: str | None = "paged", lead: int = 0, frees: bool = True) -> SimpleNamespace:
    return SimpleNamespace(growth=growth, block_size=BLOCK, lead=lead, frees_on_completion=frees)


def _slots(*pairs: tuple[int, int], k: int = 25) -> list[int]:
    """A per-slot count list of length k with the given (slot, count) pairs."""
    out = [0] * k
    for slot, count in pairs:
        out[slot] = count
    return out


def test_blocks_taken_and_freed_per_slot():
    """Taken: one block at slot 1 (member 1), 3 and 19 (member 0). Member 1 frees its 1 + 1 = 2
    blocks at slot 10, one holder less. The pool: 100 blocks, 3 held before, member 0 now holds
    4, member 1 none: 96 free, 1 holder."""
    pool, members = _setup([(30, 2), (16, 1)])
    taken, freed, done = count_small(pool, _promise(), members, [40, 10], 25)
    assert taken.tolist() == _slots((1, 1), (3, 1), (19, 1))
    assert freed.tolist() == _slots((10, 2)) and done.tolist() == _slots((10, 1))
    assert [m.num_blocks for m in members] == [4, 0]
    assert (pool.num_free, pool.num_holders) == (96, 1)


def test_async_steps_take_each_block_one_slot_earlier():
    """With async steps formation f is made at slot f - 1: the same blocks at slots 0, 2 and 18
    (25 slots reach formation 25; member 0's next, 35, is past it). The free still comes at
    slot 10, where member 1's last iteration ends."""
    pool, members = _setup([(30, 2), (16, 1)])
    taken, freed, done = count_small(pool, _promise(lead=1), members, [40, 10], 25)
    assert taken.tolist() == _slots((0, 1), (2, 1), (18, 1))
    assert freed.tolist() == _slots((10, 2)) and done.tolist() == _slots((10, 1))


def test_one_block_per_member_and_formation_without_pages():
    """`per_token` (LightLLM): a member takes a block at every formation while live. Member 0 has
    3 iterations left in a run of 5: formations 1 and 2, then it frees 1 + 2 = 3 blocks at slot 3;
    member 1 (10 left) takes one at formations 1 to 4."""
    pool, members = _setup([(30, 1), (16, 1)])
    taken, freed, done = count_small(pool, _promise("per_token"), members, [3, 10], 5)
    assert taken.tolist() == [0, 2, 2, 1, 1]
    assert freed.tolist() == [0, 0, 0, 3, 0] and done.tolist() == [0, 0, 0, 1, 0]
    assert [m.num_blocks for m in members] == [0, 5]


def test_no_growth_and_blocks_kept_to_the_batch_end():
    """No growth, and a policy whose finished members keep their blocks (a static batch returns
    them when it ends): nothing is taken or freed though member 1 finishes."""
    pool, members = _setup([(30, 2), (16, 1)])
    taken, freed, done = count_small(pool, _promise(None, frees=False), members, [40, 10], 25)
    assert not taken.any() and not freed.any() and not done.any()
    assert [m.num_blocks for m in members] == [2, 1] and (pool.num_free, pool.num_holders) == (97, 2)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["paged", "per_token", None]), st.integers(0, 1), st.booleans(),
       st.lists(st.tuples(st.integers(1, 3000), st.integers(0, 1), st.integers(1, 200)), min_size=1, max_size=12),
       st.integers(2, 120))
def test_python_and_numpy_counts_agree(growth, lead, frees, drawn, k):
    """count_small and count_bulk leave the same pool and the same per-slot counts, for members
    holding what their tokens need (or a block more) with any iterations left."""
    promise = _promise(growth, lead, frees)
    held = [(processed, -(-processed // BLOCK) + extra) for processed, extra, _ in drawn]
    remaining = [left for _, _, left in drawn]
    pool_a, members_a = _setup(held, 100_000)
    pool_b, members_b = _setup(held, 100_000)
    small = count_small(pool_a, promise, members_a, remaining, k)
    arrays = MemberArrays.of(promise, members_b, remaining)
    bulk = count_bulk(pool_b, promise, members_b, arrays, growth_plan(promise, members_b, remaining, k + lead, arrays),
                      k)
    for a, b in zip(small, bulk):
        assert len(a) == k and np.array_equal(a, b)
    assert [m.num_blocks for m in members_a] == [m.num_blocks for m in members_b]
    assert (pool_a.num_free, pool_a.num_holders) == (pool_b.num_free, pool_b.num_holders)
