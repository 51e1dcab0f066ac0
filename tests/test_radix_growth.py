"""sglang's run growth in merged allocations (engine/radix_growth.py) against the stepwise
order: at each formation the finished members are booked (their tokens join the tree, their
blocks are let go), then that formation's blocks are taken, evicting LRU leaves when short."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim_core.engine.radix_growth import RadixGrowth, grow_merged, plan_growth
from sim_core.engine.run_growth import planned_allocations
from sim_core.entities import Request
from sim_core.memory.radix_pool import RadixKvPool


def request(rid: int) -> Request:
    return Request(rid, 0.0, 4, 4)


def setup(cached: list[list[str]], held: list[tuple[list[str], int]], num_blocks: int):
    """A pool of 1-token blocks whose tree holds `cached` (finished, unlocked) and whose members
    each hold a private table of `n` blocks for the keys they will cache when they finish."""
    pool = RadixKvPool(num_blocks, 1, caching=True)
    for i, keys in enumerate(cached):
        old = request(1000 + i)
        pool.admit(old, [], pool.tree.root)
        pool.allocate(old, len(keys))
        pool.insert(old, keys, len(keys))
        pool.free(old)
    members = []
    for i, (_, n) in enumerate(held):
        member = request(i)
        pool.admit(member, [], pool.tree.root)
        pool.allocate(member, n)
        members.append(member)
    keys = {member.id: keys for member, (keys, _) in zip(members, held)}

    def on_completion(member: Request) -> None:   # sglang's _finish: cache the table, let go
        pool.insert(member, keys[member.id], member.num_blocks)
        pool.free(member)
    return pool, members, SimpleNamespace(on_completion=on_completion)


def state(pool: RadixKvPool, members: list[Request]) -> tuple:
    """Every member's table, the free list and the tree's blocks in eviction order."""
    tables = [list(m.blocks) for m in members]
    free = (pool.next_fresh, list(pool._free))
    return tables, free, pool.tree.evict(10**6)


def stepwise(pool: RadixKvPool, members: list[Request], promise, growth: RadixGrowth, k: int) -> list:
    finished = []
    for formation in range(1, k):
        for f, member in growth.done:
            if f == formation:
                used = pool.num_used
                promise.on_completion(members[member])
                finished.append((formation, member, [], used - pool.num_used))
        takers = [members[m] for f, m in zip(growth.formations, growth.takers) if f == formation]
        if takers:
            pool.allocate_each(takers)
    return finished


KEYS = st.lists(st.sampled_from("ab"), min_size=1, max_size=3)


@st.composite
def runs(draw):
    cached = draw(st.lists(KEYS, max_size=5))
    n = draw(st.integers(1, 4))
    held = [(draw(KEYS), draw(st.integers(0, 2))) for _ in range(n)]
    k = draw(st.integers(2, 8))
    left = [draw(st.integers(1, k + 2)) for _ in range(n)]   # finishes at formation left (if < k)
    plan = sorted((f, m) for m in range(n) for f in range(1, min(left[m], k)) if draw(st.booleans()))
    # a member's keys cover its table (it caches them when it finishes)
    grown = [held[m][1] + sum(1 for _, t in plan if t == m) for m in range(n)]
    held = [(keys * (1 + grown[m] // len(keys)), count) for m, (keys, count) in enumerate(held)]
    done = sorted((left[m], m) for m in range(n) if left[m] <= k - 1)
    free = draw(st.integers(0, 2))   # blocks never handed out: the rest must be evicted
    return cached, held, k, RadixGrowth([f for f, _ in plan], [m for _, m in plan], done), free


@settings(max_examples=300, deadline=None)
@given(runs())
def test_merged_growth_takes_the_ids_the_stepwise_order_takes(case):
    """Same tables, free list, tree (in LRU order) and finished rows as formation by formation,
    on pools from roomy to short (evictions between completions); runs the stepwise order could
    not grow (free + evictable short: fast-forward never plans them) are left out."""
    cached, held, k, growth, free = case
    num_blocks = max(1, sum(len(keys) for keys in cached) + sum(count for _, count in held) + free)
    answers = []
    for apply in ("stepwise", "merged"):
        pool, members, promise = setup(cached, held, num_blocks)
        if apply == "stepwise":
            try:
                finished = stepwise(pool, members, promise, growth, k)
            except AssertionError:   # eviction did not free enough
                assume(False)
        else:
            finished = grow_merged(pool, promise, members, growth, k)[0]
        pool.check_integrity([m for i, m in enumerate(members) if i not in {m for _, m in growth.done}])
        answers.append((finished, state(pool, members)))
    assert answers[0] == answers[1]


def test_a_finishing_members_pending_block_is_taken_before_it_finishes():
    """Two members, nothing free to spare: member 0 takes a block at formation 1 and finishes
    at formation 2, member 1 takes one at formation 3. Member 0's block must be in its table
    when it caches it (blocks 0 and 2: [x y] joins the tree); member 1's block comes after, from
    the fresh ids (3), not from member 0's. Member 0's two blocks stay in the tree, unlocked:
    evictable, so it made 2 blocks spare."""
    pool, members, promise = setup([], [(["x", "y"], 1), (["z", "z"], 1)], 4)
    growth = RadixGrowth([1, 3], [0, 1], [(2, 0)])
    finished, (_, _, _, taken) = grow_merged(pool, promise, members, growth, 4)
    assert finished == [(2, 0, [], 2)]
    assert (members[1].blocks, pool.tree.blocks(), taken) == ([1, 3], [0, 2], [0, 1, 0, 1])


def test_blocks_that_evict_are_taken_before_a_completion_touches_the_tree():
    """The tree caches [a] (block 0) then [b] (block 1), nothing else free. Member 1 takes a
    block at formation 1: stepwise it evicts the older leaf, [a], and gets block 0. Member 0
    (holding block 2) finishes at formation 2 and caches [a] again in its own block, 2. Taken
    after that completion instead, member 1's block would come from a tree where [a] is cached
    (member 0's copy a duplicate, freed): it would get block 2 and [a] would stay."""
    pool, members, promise = setup([["a"], ["b"]], [(["a"], 1), (["c"], 1)], 4)
    growth = RadixGrowth([1], [1], [(2, 0)])
    grow_merged(pool, promise, members, growth, 3)
    assert members[1].blocks == [3, 0]
    assert pool.tree.evict(10) == [1, 2]   # [b], then [a] in member 0's block


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3), st.integers(1, 60)), min_size=1, max_size=12),
       st.integers(2, 40), st.sampled_from([1, 4, 16]))
def test_the_growth_plan_is_planned_allocations_in_stepwise_order(figures, k, size):
    """`plan_growth` (`planned_allocations` itself for runs of few members, numpy for more) lists the blocks
    `planned_allocations` lists, in the same (formation, batch) order."""
    members, remaining = [], []
    for rid, (processed, spare, left) in enumerate(figures):
        member = request(rid)
        member.num_processed_tokens = processed + 1
        member.num_blocks = -(-member.num_processed_tokens // size) + spare   # holds its tokens' blocks
        members.append(member)
        remaining.append(left)
    promise = SimpleNamespace(block_size=size, growth="paged")
    plan = planned_allocations(promise, members, remaining, k)
    growth = plan_growth(promise, members, remaining, k, None)
    assert list(zip(growth.formations, growth.takers)) == plan
    assert growth.done == sorted((left, m) for m, left in enumerate(remaining) if left <= k - 1)
