"""A decode run's KV growth and frees applied to a counting pool in bulk (engine/fast_forward.py):
the pool keeps only counts (no block ids are recorded), so each member's blocks are added at once
and finished members free theirs, and the run's records need only how many blocks were taken
and freed, and how many holders let go, at each slot."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim_core.engine.run_growth import MemberArrays
from sim_core.memory.block_pool import CountingBlockPool

if TYPE_CHECKING:
    from sim_core.entities import Request
    from sim_core.memory.kv_pool import KvPool
    from sim_core.schedulers.steady import SteadyDecode

Steps = tuple[np.ndarray, np.ndarray, np.ndarray]   # per slot: blocks taken, blocks freed, holders done


def count_small(pool: KvPool, promise: SteadyDecode, members: list[Request], remaining: list[int], k: int) -> Steps:
    """Apply a run of k iterations (slots 0..k-1) to a counting pool, in Python (runs of few
    members): each member takes a block at formations first..min(left, k + lead) - 1, every
    `block_size` (`paged`; every formation for `per_token`; none without growth), formation f at
    slot f - lead, and a member finishing after iteration left - 1 (left <= k - 1) frees all it
    holds then, at slot `left`, when the policy frees on completion. Call it before the
    members' tokens advance (their first growth is read from the tokens they hold now).
    Returns per slot the blocks taken, the blocks freed and the holders that let go."""
    assert isinstance(pool, CountingBlockPool), "only counting pools are bulk-counted"
    lead, growth = promise.lead, promise.growth
    slots: list[int] = []   # the slot of each block taken
    if growth is not None:
        per_token = growth == "per_token"
        size = promise.block_size
        step = 1 if per_token else size
        for request, left in zip(members, remaining):
            start = 1 if per_token else size * request.num_blocks + 1 - request.num_processed_tokens
            formations = range(start - lead, (left if left < k + lead else k + lead) - lead, step)
            if formations:
                pool.add(request, len(formations))
                slots += formations
    freed, done = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)
    if promise.frees_on_completion and min(remaining) <= k - 1:
        for request, left in zip(members, remaining):
            if left <= k - 1:
                freed[left] += request.num_blocks
                done[left] += 1
                pool.free(request)
    return np.bincount(slots, minlength=k) if slots else np.zeros(k, dtype=np.int64), freed, done


def count_bulk(pool: KvPool, promise: SteadyDecode, members: list[Request], arrays: MemberArrays,
               plan: tuple[np.ndarray, np.ndarray, np.ndarray], k: int) -> Steps:
    """`count_small` for a run whose growth is planned with numpy (`plan`: `growth_plan` for
    its k slots): each member's blocks are added, then finished members free theirs."""
    assert isinstance(pool, CountingBlockPool), "only counting pools are bulk-counted"
    formations, _, counts = plan
    growing = counts.nonzero()[0]
    for member, count in zip(growing.tolist(), counts[growing].tolist()):
        pool.add(members[member], count)
    taken = np.bincount(formations - promise.lead, minlength=k)[:k]
    freed, done = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)
    ending = (arrays.left <= k - 1).nonzero()[0]
    if promise.frees_on_completion and len(ending):
        for member in ending.tolist():
            pool.free(members[member])
        at = arrays.left[ending]   # a member finishing after iteration left-1 frees at formation left
        freed = np.bincount(at, weights=arrays.held[ending] + counts[ending], minlength=k).astype(np.int64)
        done = np.bincount(at, minlength=k)
    return taken, freed, done
