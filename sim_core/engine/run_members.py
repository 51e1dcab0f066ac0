"""A decode run's members as arrays: who is live at each iteration, what KV they hold, and the
tokens they gain (shared by single-stage runs, engine/fast_forward.py, and pipeline runs,
engine/pipeline_run.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from sim_core.entities import Request

on_decode_runs = Request.on_decode_runs

_max = np.maximum.reduce   # ndarray.max without its Python wrapper

if TYPE_CHECKING:
    from sim_core.entities import Batch
    from sim_core.results.record import Recorder


def member_order(batch: Batch, remaining: list[int], needs_context: bool,
                 left: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """The members' iterations left, sorted, and (when the cost model reads KV context) the
    tokens held by the members from each position of that order on (suffix sums). `left`:
    `remaining` as an array, when the caller has it already."""
    order = np.array(remaining, dtype=np.int64) if left is None else left.copy()
    order.sort()
    if not needs_context:
        return order, None
    processed = np.array([r.num_processed_tokens for r in batch.requests], dtype=np.int64)
    by_remaining = processed[np.argsort(remaining, kind="stable")]
    return order, np.concatenate((by_remaining[::-1].cumsum()[::-1], [0]))


def live_members(order: np.ndarray, suffix: np.ndarray | None, iterations: np.ndarray,
          lead: int) -> tuple[np.ndarray, np.ndarray]:
    """How many members are live at each of `iterations` and the KV tokens they hold when its
    batch is formed (zeros when the cost model does not read them): a member gains one per
    iteration; formed `lead` iterations ahead (async steps), the batch counts `lead` fewer."""
    first_live = order.searchsorted(iterations, side="right")  # members finished before j
    counts = len(order) - first_live
    if suffix is None:
        return counts, np.zeros(len(iterations), dtype=np.int64)
    return counts, suffix[first_live] + counts * (iterations - lead)


def advance_tokens(members: list[Request], remaining: list[int], ends: np.ndarray, recorder: Recorder,
                    order: np.ndarray, through: bool = False) -> np.ndarray:
    """Each live member gains a token per skipped iteration; those whose last token falls in
    the skipped iterations finish. Records the gaps between tokens (TBT) of the skipped
    iterations. `order`: `remaining` sorted. `through`: the last iteration, k-1, is applied
    too (its gaps are not recorded here: `FastForward._end_batch`). Returns the steps between
    iterations 0..k-2 (`ends[1:k-1] - ends[:k-2]`, for the run's records)."""
    k = len(ends)
    last = k - 1 if through else k - 2                 # the last iteration applied
    if through:   # stepwise, the last iteration's batch end widens the members' widest gap too
        gaps = ends[1:k] - ends[: k - 1]
        steps = gaps[:-1]                              # steps[j-1] = end_j - end_(j-1), j = 1..k-2
    else:
        gaps = steps = ends[1: k - 1] - ends[: k - 2]
    first_end, all_tokens = float(ends[0]), last + 1
    first_gaps = [first_end - request.last_token_at for request in members]   # decoding: a token emitted
    if int(order[0]) > last:   # nobody finishes before the last applied iteration (most cuts)
        widest_all = float(_max(gaps)) if len(gaps) else -1.0   # (gaps > 0)
        end_all = float(ends[last])
        on_decode_runs(members, remaining, first_gaps, all_tokens, end_all, widest_all)
        alive: np.ndarray | int = len(remaining)   # every member sees every step
    else:
        # running_max[j-1]: the widest gap between iterations 0..j (read by the few that finish)
        running_max = np.maximum.accumulate(gaps)
        widest_all = float(running_max[-1]) if len(gaps) else -1.0   # of a member in every iteration
        end_all = float(ends[last])
        for request, left, gap in zip(members, remaining, first_gaps):
            if left > last:   # takes part in every applied iteration (most members)
                request.on_decode_run(all_tokens, end_all, widest_all if widest_all > gap else gap,
                                      left == all_tokens)
            else:             # finishes after iteration left-1
                widest = float(running_max[left - 2]) if left >= 2 else gap
                request.on_decode_run(left, float(ends[left - 1]), widest if widest > gap else gap, True)
        alive = len(remaining) - order.searchsorted(np.arange(1, k - 1), side="right")
    recorder.on_run_gaps(first_gaps, steps, alive, first_end, ends[1: k - 1])
    return steps


def record_run_batches(recorder: Recorder, replica: int, batch: Batch, lefts: list[int], order: np.ndarray,
                       suffix: np.ndarray | None, lead: int, origin: int, batch_ids: np.ndarray, formed: np.ndarray,
                       with_context: bool, padded_size: Callable[[int], int]) -> None:
    """Batch rows of a run's formations origin, origin+1, ... (`batch_ids` and `formed`, when
    each was formed, one per formation), one chunk per set of live members: a new chunk where
    members finish, at each distinct count of iterations left (`lefts`, in `batch`'s member
    order) inside the formations. `padded_size`: the batch size the GPU runs for n members
    (`BatchShape` counts the padding as decodes)."""
    stop = origin + len(batch_ids)
    if not recorder.keeps_batch_detail:   # engine.record: series keeps a decode token per live member alone
        counts = live_members(order, None, np.arange(origin, stop, dtype=np.int64), lead)[0]
        recorder.on_run_batch_counts(batch_ids, replica, formed, counts)
        return
    ids = [m.id for m in batch.requests]
    inner = [left for left in lefts if origin < left < stop]
    boundaries = sorted(set(inner)) if inner else []
    boundaries.append(stop)
    contexts = live_members(order, suffix, np.arange(origin, stop, dtype=np.int64), lead)[1]
    on_rows = recorder.on_run_batches
    start, every = origin, min(lefts) > origin   # every: all members live in the first chunk
    for boundary in boundaries:
        live = tuple(ids) if every else tuple([i for i, left in zip(ids, lefts) if left > start])
        every = False
        num_live = len(live)
        padded = padded_size(num_live)
        rows = slice(start - origin, boundary - origin)
        on_rows(boundary - start, batch_ids[rows], replica, formed[rows], num_live, num_live, 0,
                (num_live if with_context else 0) + padded - num_live, contexts[rows], live, (1,) * num_live, padded)
        start = boundary
