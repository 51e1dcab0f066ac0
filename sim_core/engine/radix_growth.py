"""An sglang decode run's KV growth applied in bulk on the radix pool when no block events are
recorded (engine/fast_forward.py; with block records `_grow_evicting` takes them formation by
formation, at each one's instant).

Stepwise, at each formation of the run the members that finished at the end of the previous
iteration are booked first (the policy inserts their tokens into the radix tree and frees their
blocks), then every member whose next token outgrows its blocks takes one, in batch order,
evicting least-recently-used tree leaves when the free list is short. Here the blocks of
consecutive formations are taken in one `RadixKvPool.allocate_each`, cut only before a
completion that the blocks pending so far cannot be taken after:

* one of them is the finishing member's own (it caches and frees its table), or
* there are more of them than the free list holds (some evict, and the completion's insert
  changes which leaves are least recently used).

Otherwise taking them after the completion hands out the same ids: a completion evicts
nothing, it only adds blocks to the back of the free list (first in, first out), and between
completions the tree is untouched, so one eviction toward all the pending blocks takes the same
leaves, in the same order, as one per formation. Most runs are cut by an arrival before any
member finishes: their growth is one call.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sim_core.engine.run_growth import NUMPY_MEMBERS, MemberArrays, growth_plan, planned_allocations

if TYPE_CHECKING:
    from sim_core.engine.fast_forward import Changes, Finished
    from sim_core.entities import Request
    from sim_core.memory.radix_pool import RadixKvPool
    from sim_core.schedulers.steady import SteadyDecode


@dataclass(slots=True, eq=False)
class RadixGrowth:
    """A run's growth and completions at formations 1..k-1, each list in stepwise order."""

    formations: list[int]          # the formation of each block taken (formation, then batch order)
    takers: list[int]              # the member index taking it
    done: list[tuple[int, int]]    # (formation, member index) of the members that finish


def plan_growth(promise: SteadyDecode, members: list[Request], remaining: list[int], k: int,
                arrays: MemberArrays | None) -> RadixGrowth:
    """The blocks the run's members take and who finishes where (read before the members'
    tokens are advanced); `arrays`: their figures, read already when the run started."""
    done = sorted((left, member) for member, left in enumerate(remaining) if left <= k - 1)
    n = len(members)
    if n < NUMPY_MEMBERS:
        plan = planned_allocations(promise, members, remaining, k)
        return RadixGrowth([f for f, _ in plan], [m for _, m in plan], done)
    formations, takers, _ = growth_plan(promise, members, remaining, k, arrays)
    order = np.argsort(formations, kind="stable")   # grouped by member: ties stay in batch order
    return RadixGrowth(formations[order].tolist(), takers[order].tolist(), done)


def grow_merged(pool: RadixKvPool, promise: SteadyDecode, members: list[Request], growth: RadixGrowth,
                k: int) -> Changes:
    """Apply `growth` (see the module docstring); the members' tokens are advanced already.
    Returns the finished members and the blocks taken per formation (no ids: none are recorded)."""
    formations, takers = growth.formations, growth.takers
    finished: Finished = []
    flushed = 0   # blocks taken so far: takers[:flushed]
    if growth.done:
        last = {member: index for index, member in enumerate(takers)}   # each member's last block
        for formation, member in growth.done:
            cut = bisect_left(formations, formation)   # the blocks of the formations before it
            if last.get(member, -1) >= flushed or cut - flushed > pool.num_free_list:
                pool.allocate_each([members[m] for m in takers[flushed:cut]])
                flushed = cut
            finished.append(complete(pool, promise, members, formation, member))
    if flushed < len(takers):
        pool.allocate_each([members[m] for m in takers[flushed:]])
    taken = np.bincount(np.asarray(formations, dtype=np.int64), minlength=k)
    return finished, (None, None, [], taken.tolist())


def complete(pool: RadixKvPool, promise: SteadyDecode, members: list[Request], formation: int,
             member: int) -> tuple[int, int, list[int], int]:
    """The policy books a member's completion; returns its `Finished` row (blocks made spare:
    free or evictable)."""
    assert promise.on_completion is not None, "radix runs go past a completion only when the policy books it"
    used = pool.num_used
    promise.on_completion(members[member])
    return formation, member, [], used - pool.num_used
