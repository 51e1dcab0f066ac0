"""The KV blocks a decode run's members take, planned before the run is applied
(engine/fast_forward.py): when each member outgrows its blocks (`paged`: every `block_size`
tokens; `per_token`: one block an iteration), how far a run may go before a formation could find
no spare block (`growth_limit`), and the order the stepwise path would take them in
(`ordered_events`), so that bulk allocations hand out the same block ids.

Two forms of the same plan: Python lists for runs of few members (`planned_allocations`) and
numpy for runs of NUMPY_MEMBERS or more (`growth_plan`); tests/test_growth_plan.py checks they
agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim_core.entities import Request
    from sim_core.schedulers.steady import SteadyDecode

# runs of this many members or more plan their block growth with numpy (`growth_plan`); fewer
# in Python (`planned_allocations`), which costs less for small runs
NUMPY_MEMBERS = 8


@dataclass(slots=True, eq=False)
class MemberArrays:
    """A run's members as numpy arrays, read once when the run starts (a member's tokens and
    blocks do not change until the run's end applies it), for the numpy growth plan."""

    left: np.ndarray       # iterations left (`DecodeRun.remaining`)
    held: np.ndarray       # KV blocks held
    first: np.ndarray      # the first formation at which each takes a block (`first_growth`)

    @staticmethod
    def of(promise: SteadyDecode, requests: list[Request], remaining: list[int]) -> MemberArrays:
        held = np.array([r.num_blocks for r in requests], dtype=np.int64)
        if promise.growth == "paged":   # first_growth, vectorised
            processed = np.array([r.num_processed_tokens for r in requests], dtype=np.int64)
            first = promise.block_size * held + 1 - processed
        else:
            first = np.ones(len(requests), dtype=np.int64)
        return MemberArrays(np.array(remaining, dtype=np.int64), held, first)


def ordered_events(promise: SteadyDecode, members: list[Request], remaining: list[int],
                    k: int, arrays: MemberArrays | None = None) -> list[tuple[int, int, int]]:
    """(formation, kind, member) of formations 1..k-1 in stepwise order: at each formation the
    members that finished at the end of the previous iteration go first (kind 0, batch order),
    then block allocations (kind 1, batch order)."""
    if len(members) < NUMPY_MEMBERS:
        events = [(left, 0, m) for m, left in enumerate(remaining) if left <= k - 1]
        events += [(j, 1, m) for j, m in planned_allocations(promise, members, remaining, k)]
        events.sort()
        return events
    left = np.asarray(remaining, dtype=np.int64)
    done = (left <= k - 1).nonzero()[0]
    formations, takers, _ = growth_plan(promise, members, remaining, k, arrays)
    formation = np.concatenate((left[done], formations))
    kind = np.concatenate((np.zeros(len(done), np.int64), np.ones(len(formations), np.int64)))
    member = np.concatenate((done, takers))
    order = np.lexsort((member, kind, formation))
    return list(zip(formation[order].tolist(), kind[order].tolist(), member[order].tolist()))


def surely_spare(promise: SteadyDecode, free: int, n: int, limit: int) -> bool:
    """Whether one of `free` KV blocks stays spare over `limit` iterations of `n` members even
    if each grew as often as possible."""
    return promise.growth == "paged" and n * ((limit - 1) // promise.block_size + 1) <= free - 1


def numpy_growth(promise: SteadyDecode, requests: list[Request]) -> bool:
    """Whether the run's KV growth is planned with numpy (`growth_plan`)."""
    return promise.growth == "paged" and len(requests) >= NUMPY_MEMBERS


def growth_limit(promise: SteadyDecode, free: int, requests: list[Request], remaining: list[int],
                 limit: int, arrays: MemberArrays | None = None) -> int:
    """Shorten `limit` so that every formation keeps one of the pool's `free` KV blocks spare
    (each member's check needs a free block even when it takes none); blocks of finished members
    count as free. `arrays`: the members' figures, read already (`MemberArrays.of`)."""
    n = len(requests)
    if promise.growth is None:
        return limit
    if free < 1:
        return 1
    if promise.growth == "per_token":
        return min(limit, free // n + 1)  # conservative: as if nobody finished
    if surely_spare(promise, free, n, limit):
        return limit
    lead = promise.lead   # formation j is made at slot j - lead (async steps: one ahead)
    if arrays is not None and int(growth_counts(promise, arrays, limit + lead).sum()) <= free - 1:
        return limit   # even if nobody finished, the blocks the members take leave one spare
    if n >= NUMPY_MEMBERS:
        formations, _, counts = growth_plan(promise, requests, remaining, limit + lead, arrays)
    else:
        allocations = planned_allocations(promise, requests, remaining, limit + lead)
        formations = np.asarray([j for j, _ in allocations], dtype=np.int64)
        counts = np.bincount([m for _, m in allocations], minlength=n)
    taken = np.bincount(formations - lead, minlength=limit + 1)[: limit + 1]
    freed = np.zeros(limit + 1, dtype=np.int64)
    # a finished member frees what it held and what it grew, unless the policy says its blocks
    # may stay held (`counts_frees` False: a prefix cache's shared blocks outlive their holder)
    if promise.frees_on_completion and promise.counts_frees:
        left = np.asarray(remaining, dtype=np.int64) if arrays is None else arrays.left
        ending = left < limit
        held = np.array([r.num_blocks for r in requests], dtype=np.int64) if arrays is None else arrays.held
        np.add.at(freed, left[ending], held[ending] + counts[ending])
    spare = free + freed.cumsum() - taken.cumsum()
    short = (spare[1:limit] < 1).nonzero()[0]
    return min(limit, int(short[0]) + 1) if len(short) else limit


def planned_allocations(promise: SteadyDecode, requests: list[Request], remaining: list[int],
                        num_iterations: int) -> list[tuple[int, int]]:
    """(formation, member index) of the blocks members take at formations 1..num_iterations-1
    while they are live, sorted as the stepwise path takes them (formation, then batch order);
    the Python form of `growth_plan`, cheaper for runs of few members."""
    if promise.growth is None:
        return []
    per_token = promise.growth == "per_token"
    size = promise.block_size
    step = 1 if per_token else size
    plan: list[tuple[int, int]] = []
    for member, (request, left) in enumerate(zip(requests, remaining)):
        start = 1 if per_token else size * request.num_blocks + 1 - request.num_processed_tokens   # `first_growth`
        end = left if left < num_iterations else num_iterations
        if start + step >= end:   # (most members of a short run: one block or none)
            if start < end:
                plan.append((start, member))
        else:
            plan.extend(zip(range(start, end, step), repeat(member)))
    plan.sort()
    return plan


def first_growth(promise: SteadyDecode, request: Request) -> int:
    """The first formation of a run at which a member takes a block (then one every formation
    for `per_token` growth, every `block_size` for `paged`: whenever its next token outgrows
    its blocks)."""
    if promise.growth == "per_token":
        return 1
    return promise.block_size * request.num_blocks + 1 - request.num_processed_tokens


def growth_counts(promise: SteadyDecode, arrays: MemberArrays, num_iterations: int) -> np.ndarray:
    """How many blocks each member takes at formations 1..num_iterations-1 while live (the
    counts of `growth_plan`, without the blocks)."""
    step = 1 if promise.growth == "per_token" else promise.block_size
    return np.maximum(np.minimum(arrays.left, num_iterations) - arrays.first + step - 1, 0) // step


def growth_plan(promise: SteadyDecode, requests: list[Request], remaining: list[int],
                 num_iterations: int, arrays: MemberArrays | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The blocks members take at formations 1..num_iterations-1 while they are live: each
    block's formation and member index (grouped by member, formations ascending) and the number
    per member (see `first_growth`). `arrays`: the members' figures, read already."""
    n = len(requests)
    if promise.growth is None:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(n, dtype=np.int64)
    end = np.minimum(np.asarray(remaining, dtype=np.int64) if arrays is None else arrays.left, num_iterations)
    if arrays is not None:
        step, first = (1 if promise.growth == "per_token" else promise.block_size), arrays.first
    elif promise.growth == "per_token":
        step, first = 1, np.ones(n, dtype=np.int64)
    else:
        step = promise.block_size
        held = np.array([r.num_blocks for r in requests], dtype=np.int64)      # first_growth, vectorised
        first = step * held + 1 - np.array([r.num_processed_tokens for r in requests], dtype=np.int64)
    counts = np.maximum(end - first + step - 1, 0) // step
    members = np.arange(n, dtype=np.int64).repeat(counts)
    within = np.arange(len(members), dtype=np.int64) - (counts.cumsum() - counts).repeat(counts)
    return first.repeat(counts) + step * within, members, counts
