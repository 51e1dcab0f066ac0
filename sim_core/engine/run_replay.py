"""A decode run's block events replayed one by one at their instants (vllm_v1's runs).

Fast-forward applies most runs' block changes in bulk (engine/fast_forward.py). Two kinds of
run need each change made through the policy, in the stepwise order, at its own instant:

* prefix caching: each formation keys the blocks its members' tokens fill, and a member that
  finishes keys its last blocks as it frees them; where keyed blocks go in the free queue, which
  blocks an allocation evicts and when the key events happen all follow from that order;
* async scheduling (`SteadyDecode.in_flight`): formation f is made one instant earlier than
  stepwise serial, so its allocations come before the frees of the iteration it overlaps.

Slot s (1..k-1 for a run of k iterations) is the instant iteration s-1 ends. At it, stepwise
simulation first processes the outputs of iteration s-1 (members whose last token it was
finish, batch order), then makes formation s + lead (`lead` = 1 with async steps, else 0):
each live member, in batch order, takes a block when its tokens outgrow its blocks, then keys
the blocks its tokens fill. Formation f counts p + f - lead tokens of a member that held p
tokens when the run started (async: the step in flight counts as computed), so it keys a block
exactly when that count reaches a multiple of the block size; keying at other formations
changes nothing. The recorder's clock is set to each slot's instant while its events are
replayed (and restored after), so every record carries the time stepwise simulation gives it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from sim_core.engine.run_growth import first_growth
from sim_core.memory.block_hash_cache import HashedBlockPool
from sim_core.memory.block_pool import BlockPool
from sim_core.results.record import FINISHED

if TYPE_CHECKING:
    from sim_core.entities import Request
    from sim_core.memory.kv_pool import KvPool
    from sim_core.results.record import Recorder
    from sim_core.schedulers.steady import SteadyDecode

FREE, ALLOCATE, KEY = 0, 1, 2   # event kinds, in their order within a slot and member

# one slot's events: (slot, members finishing, members taking a block, members keying), each
# list in batch order
Slot = tuple[int, list[int], list[int], list[int]]


def run_events(promise: SteadyDecode, members: list[Request], remaining: list[int], k: int) -> list[Slot]:
    """The block events of slots 1..k-1 that have any, slot by slot: the growth is planned as
    `planned_allocations` plans it (formations 1+lead..k-1+lead, each member every block size
    from `first_growth`), without sorting (members are visited in batch order)."""
    lead = promise.lead
    frees: defaultdict[int, list[int]] = defaultdict(list)
    grows: defaultdict[int, list[int]] = defaultdict(list)
    keys: defaultdict[int, list[int]] = defaultdict(list)
    for member, left in enumerate(remaining):
        if left <= k - 1:
            frees[left].append(member)
    growth, stop = promise.growth, k + lead
    if growth is not None:
        step = 1 if growth == "per_token" else promise.block_size
        for member, (request, left) in enumerate(zip(members, remaining)):
            for formation in range(first_growth(promise, request), min(left, stop), step):
                grows[formation - lead].append(member)
    if promise.keys_blocks:
        size = promise.block_size
        for member, (request, left) in enumerate(zip(members, remaining)):
            # the first formation f >= 1 + lead whose count p + f - lead is a multiple of the size
            first = 1 + lead + (-(request.num_processed_tokens + 1)) % size
            for formation in range(first, min(left, stop), size):
                keys[formation - lead].append(member)
    none: list[int] = []
    return [(slot, frees.get(slot, none), grows.get(slot, none), keys.get(slot, none))
            for slot in sorted(frees.keys() | grows.keys() | keys.keys())]


def replay(promise: SteadyDecode, pool: KvPool, members: list[Request], processed: list[int],
           slots: list[Slot], ends: np.ndarray, replica: int,
           recorder: Recorder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Make the events of `slots` (run_events) through the pool and the policy, each at its
    slot's instant (`ends[slot - 1]`); `processed[m]`: member m's tokens when the run started.
    Returns, per slot 0..k-1, the blocks taken, the blocks that went back to the pool, and the
    holders that let go of all theirs.

    Without block records a slot's blocks are taken in one pool call, then its keys made: the
    same as member by member (allocation, then keys), since keying touches only held blocks,
    which no allocation takes, and an allocation that evicts a key its member's new keying
    shares leaves the same index either way (the later holder takes the key's place); only the
    order of the records of key events would differ, and those are kept only with block records."""
    k = len(ends)
    taken = np.zeros(k, dtype=np.int64)
    freed = np.zeros(k, dtype=np.int64)
    done = np.zeros(k, dtype=np.int64)
    frees, now, keeps = promise.frees_on_completion, recorder.now, recorder.keeps_blocks
    assert isinstance(pool, (BlockPool, HashedBlockPool)), "replayed runs grow by pages from an id pool"
    key_each, allocate_each = promise.key_each, pool.allocate_each
    for slot, finishing, growing, keying in slots:
        recorder.now = float(ends[slot - 1])
        for member in finishing:
            request = members[member]
            recorder.on_state(replica, request.id, FINISHED)
            if frees:
                before, held = pool.num_used, request.num_blocks > 0
                promise.release(request)
                freed[slot] += before - pool.num_used
                done[slot] += held
        if keeps:
            _member_by_member(promise, pool, members, processed, slot, growing, keying, replica, recorder)
        else:
            if growing:
                allocate_each([members[member] for member in growing])
            if keying:
                key_each([members[member] for member in keying], [processed[member] + slot for member in keying])
        taken[slot] = len(growing)
    recorder.now = now
    return taken, freed, done


def _member_by_member(promise: SteadyDecode, pool: KvPool, members: list[Request], processed: list[int], slot: int,
                      growing: list[int], keying: list[int], replica: int, recorder: Recorder) -> None:
    """A slot's allocations and keys in stepwise order (member by member, a member's block
    before its keys), each block recorded."""
    for member, kind in sorted([(member, ALLOCATE) for member in growing] + [(member, KEY) for member in keying]):
        request = members[member]
        if kind == ALLOCATE:
            recorder.on_allocate(replica, request.id, pool.allocate(request, 1))
        else:
            promise.key_blocks(request, processed[member] + slot)
