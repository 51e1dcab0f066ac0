"""Advance runs of identical decode iterations in one step (pipeline parallelism 1 only).

When a replica forms a decode-only batch that its policy promises to re-form unchanged
(`steady_decode_limit`), the iterations up to the next thing that can change a decision are
known in advance:

* a member finishes (it finishes at the end of iteration `total - processed - 1`);
* KV blocks run short: the run stops before any iteration that could need a free block the
  pool might not have (`paged`: a member takes a block when its tokens outgrow its blocks;
  `per_token`: every member takes one block per iteration);
* a request is routed to the replica: the run is cut at the first iteration ending at or
  after its arrival (at equal times the arrival is seen first, as in Vidur).

A run keeps iteration 0's batch in flight and one kernel event at the end of its last
iteration. There, the skipped iterations are applied in bulk (tokens, block allocations in
the order the slow path makes them, records with the times it would give them) and the last
iteration ends through the ordinary stage-end handler, so everything after is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim_core.entities import Batch
from sim_core.predictor import BatchShape

MAX_RUN = 1 << 20  # iterations planned at once (a longer run simply starts again)


@dataclass(slots=True, eq=False)
class DecodeRun:
    """A planned run: iteration j of `first`'s requests ends at `ends[j]`."""

    first: Batch
    started_at: float
    ends: np.ndarray              # end times of iterations 0..planned-1
    num_iterations: int           # iterations that will run (shrinks when a request arrives)
    token: int
    num_waiting: int              # queue length when the run started (arrivals cut the run)


class FastForward:
    """Plans, cuts and completes decode runs for a Simulator."""

    def __init__(self, simulator) -> None:
        self.sim = simulator
        self.runs: dict[int, DecodeRun] = {}
        self._tokens = 0

    def try_start(self, replica: int, batch: Batch, preempted: bool) -> bool:
        """Start a run for a just-formed batch; False leaves it to the ordinary path."""
        scheduler = self.sim.schedulers[replica]
        limit = min(scheduler.steady_decode_limit(batch, preempted), MAX_RUN)
        if limit < 2:
            return False
        requests = batch.requests
        limit = min(limit, min(r.total_tokens - r.num_processed_tokens for r in requests))
        limit = growth_limit(scheduler, requests, limit)
        if limit < 2:
            return False
        now = self.sim.kernel.now
        durations = self.sim.predictor.decode_run_times(batch.shape, 0, limit)
        durations[0] += now
        ends = np.cumsum(durations)  # sequential sums: the same floats as one stage end at a time
        self._tokens += 1
        self.runs[replica] = DecodeRun(batch, now, ends, limit, self._tokens, len(scheduler.waiting))
        stage = self.sim.stages[replica][0]
        stage.busy, stage.started_at = True, now
        self.sim.kernel.at(float(ends[-1]), self.on_run_end, replica, self._tokens)
        return True

    def on_request_routed(self, replica: int) -> None:
        """A request joined the replica's queue: end the run at the first iteration ending at or
        after now, so the next formation sees the request."""
        run = self.runs.get(replica)
        if run is None:
            return
        now = self.sim.kernel.now
        last = int(np.searchsorted(run.ends[: run.num_iterations], now, side="left"))
        if last + 1 >= run.num_iterations:
            return
        run.num_iterations = last + 1
        self._tokens += 1
        run.token = self._tokens
        end = float(run.ends[last])
        if end == now:
            self.sim.kernel.soon(self.on_run_end, replica, run.token)
        else:
            self.sim.kernel.at(end, self.on_run_end, replica, run.token)

    def on_run_end(self, replica: int, token: int) -> None:
        run = self.runs.get(replica)
        if run is None or run.token != token:
            return  # superseded by a cut
        del self.runs[replica]
        last = self._apply(replica, run) if run.num_iterations > 1 else run.first
        stage = self.sim.stages[replica][0]
        stage.started_at = run.started_at if run.num_iterations == 1 else float(run.ends[run.num_iterations - 2])
        self.sim.on_stage_end(replica, 0, last)

    def _apply(self, replica: int, run: DecodeRun) -> Batch:
        """Apply iterations 0..k-2 in bulk; return the batch of the last iteration, k-1."""
        sim, k, first = self.sim, run.num_iterations, run.first
        scheduler = sim.schedulers[replica]
        ends = run.ends[:k]
        requests, n = first.requests, len(first.requests)
        allocations = planned_allocations(scheduler, requests, k)
        self._advance_tokens(requests, ends, sim.recorder)
        blocks = [scheduler.pool.allocate_one(requests[member]) for _, member in allocations]
        scheduler.num_batches += k - 2  # ids of the skipped iterations' batches
        last = scheduler.make_batch(list(requests), [1] * n)
        context = first.shape.decode_context + n * (k - 1) if first.shape.num_decodes else 0
        last.shape = BatchShape(n, n, (), n if first.shape.num_decodes else 0, context)
        last.formed_at = float(ends[k - 2])
        self._record(replica, run, allocations, blocks)
        scheduler.on_steady_decode(first, last, k)
        return last

    @staticmethod
    def _advance_tokens(requests, ends: np.ndarray, recorder) -> None:
        """Members gain one token per skipped iteration; record the gaps between tokens."""
        skipped = len(ends) - 1
        first_end, last_end = float(ends[0]), float(ends[skipped - 1])
        steps = np.diff(ends[:skipped])
        step_max = float(steps.max()) if len(steps) else 0.0
        append_gap = recorder.token_gaps.append
        for request in requests:
            gap = first_end - request.last_token_at  # decoding requests have emitted a token
            append_gap(gap)
            request.max_token_gap = max(request.max_token_gap, gap, step_max)
            request.num_processed_tokens += skipped
            request.last_token_at = last_end
        if len(steps):
            recorder.weighted_gaps[0].extend(steps.tolist())
            recorder.weighted_gaps[1].extend([len(requests)] * len(steps))

    def _record(self, replica: int, run: DecodeRun, allocations: list, blocks: list) -> None:
        """What the slow path records for iterations 0..k-2 and the formation of k-1: per
        iteration a stage row, the replica state after its batch end, the next formation's
        block allocations, its batch row and the replica state after that formation."""
        sim, k, first = self.sim, run.num_iterations, run.first
        recorder, pool = sim.recorder, sim.schedulers[replica].pool
        ends = run.ends[: k - 1]
        end_list = ends.tolist()
        recorder.on_stage_rows(first.id, replica, 0, [run.started_at] + end_list[:-1], end_list)
        formations = [f for f, _ in allocations]
        if allocations:
            requests = first.requests
            recorder.on_allocate_rows([end_list[f - 1] for f in formations], replica,
                                      [requests[m].id for _, m in allocations], blocks)
        recorder.on_batch_rows(first.id + 1, replica, end_list, tuple(r.id for r in first.requests),
                               tuple(first.num_tokens))
        base = pool.num_used - len(allocations)
        after = base + np.cumsum(np.bincount(formations, minlength=k)[1:k])
        before = np.concatenate(([base], after[:-1]))
        recorder.on_replica_states(replica, np.repeat(ends, 2), np.column_stack((before, after)).ravel(),
                                   run.num_waiting, pool.num_holders)


def growth_limit(scheduler, requests, limit: int) -> int:
    """Shorten `limit` so that every formation of the run keeps one KV block spare (each
    member's check needs a free block even when it takes none)."""
    free, n = scheduler.pool.num_free, len(requests)
    if scheduler.growth is None:
        return limit
    if free < 1:
        return 1
    if scheduler.growth == "per_token":
        return min(limit, free // n + 1)
    size = scheduler.block_size
    if n * ((limit - 1) // size + 1) <= free - 1:
        return limit  # even if every member grew as often as possible, one block stays spare
    allocations = planned_allocations(scheduler, requests, limit)
    if len(allocations) > free - 1:
        limit = min(limit, allocations[free - 1][0])
    return limit


def planned_allocations(scheduler, requests, num_iterations: int) -> list[tuple[int, int]]:
    """(formation, member index) of the blocks members take at formations 1..num_iterations-1,
    in the order the slow path takes them (by formation, then batch order)."""
    if scheduler.growth is None:
        return []
    if scheduler.growth == "per_token":
        return [(j, m) for j in range(1, num_iterations) for m in range(len(requests))]
    size, plan = scheduler.block_size, []
    for member, request in enumerate(requests):
        first = size * len(request.blocks) + 1 - request.num_processed_tokens
        plan.extend((j, member) for j in range(first, num_iterations, size))
    plan.sort()
    return plan
