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

from typing import TYPE_CHECKING

import numpy as np

from sim_core.results.record import FINISHED

if TYPE_CHECKING:
    from sim_core.entities import Request
    from sim_core.memory.kv_pool import KvPool
    from sim_core.results.record import Recorder
    from sim_core.schedulers.steady import SteadyDecode

FREE, ALLOCATE, KEY = 0, 1, 2   # event kinds, in their order within a slot and member

Event = tuple[int, int, int, int]   # (slot, phase: 0 outputs / 1 formation, member, kind)


def run_events(promise: SteadyDecode, members: list[Request], remaining: list[int], k: int,
               allocations: list[tuple[int, int]]) -> list[Event]:
    """The block events of slots 1..k-1 in stepwise order. `allocations` are the planned
    (formation, member) growths of formations 1+lead..k-1+lead (planned_allocations)."""
    lead = promise.lead
    events = [(left, 0, member, FREE) for member, left in enumerate(remaining) if left <= k - 1]
    events += [(formation - lead, 1, member, ALLOCATE) for formation, member in allocations]
    if promise.keys_blocks:
        size = promise.block_size
        for member, (request, left) in enumerate(zip(members, remaining)):
            # the first formation f >= 1 + lead whose count p + f - lead is a multiple of the size
            first = 1 + lead + (-(request.num_processed_tokens + 1)) % size
            events += [(formation - lead, 1, member, KEY) for formation in range(first, min(left, k + lead), size)]
    events.sort()
    return events


def replay(promise: SteadyDecode, pool: KvPool, members: list[Request], processed: list[int],
           events: list[Event], ends: np.ndarray, replica: int,
           recorder: Recorder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Make the `events` (run_events) through the pool and the policy, each at its slot's
    instant (`ends[slot - 1]`); `processed[m]`: member m's tokens when the run started. Returns,
    per slot 0..k-1, the blocks taken, the blocks that went back to the pool, and the holders
    that let go of all theirs."""
    k = len(ends)
    taken = np.zeros(k, dtype=np.int64)
    freed = np.zeros(k, dtype=np.int64)
    done = np.zeros(k, dtype=np.int64)
    frees, now = promise.frees_on_completion, recorder.now
    slot_now = -1
    for slot, _, member, kind in events:
        if slot != slot_now:
            slot_now, recorder.now = slot, float(ends[slot - 1])
        request = members[member]
        if kind == ALLOCATE:
            recorder.on_allocate(replica, request.id, pool.allocate(request, 1))
            taken[slot] += 1
        elif kind == KEY:
            promise.key_blocks(request, processed[member] + slot)
        else:
            recorder.on_state(replica, request.id, FINISHED)
            if frees:
                before, held = pool.num_used, request.num_blocks > 0
                promise.release(request)
                freed[slot] += before - pool.num_used
                done[slot] += held
    recorder.now = now
    return taken, freed, done
