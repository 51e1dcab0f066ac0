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
    alloc_iteration: np.ndarray   # iteration whose formation makes each planned allocation
    alloc_member: np.ndarray      # index in `first.requests` of the member that allocates
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
        alloc_iteration, alloc_member, limit = self._plan_growth(scheduler, requests, limit)
        if limit < 2:
            return False
        now = self.sim.kernel.now
        durations = self.sim.predictor.decode_run_times(batch.shape, 0, limit)
        ends = np.cumsum(np.concatenate(([now], durations)))[1:]
        self._tokens += 1
        run = DecodeRun(batch, now, ends, limit, alloc_iteration, alloc_member, self._tokens,
                        len(scheduler.waiting))
        self.runs[replica] = run
        stage = self.sim.stages[replica][0]
        stage.busy, stage.started_at = True, now
        self.sim.kernel.at(float(ends[-1]), self.on_run_end, replica, run.token)
        return True

    @staticmethod
    def _plan_growth(scheduler, requests, limit: int):
        """Allocations the run's formations 1..limit-1 make, sorted as the slow path makes them
        (by iteration, then batch order), and the run length that keeps one block spare."""
        free = scheduler.pool.num_free
        n = len(requests)
        if scheduler.growth is None:
            return np.empty(0, np.int64), np.empty(0, np.int64), limit
        if scheduler.growth == "per_token":
            limit = min(limit, free // n + 1)
            iterations = np.repeat(np.arange(1, limit, dtype=np.int64), n)
            return iterations, np.tile(np.arange(n, dtype=np.int64), max(limit - 1, 0)), limit
        size = scheduler.block_size
        held = np.fromiter((len(r.blocks) for r in requests), np.int64, n)
        processed = np.fromiter((r.num_processed_tokens for r in requests), np.int64, n)
        first = size * held + 1 - processed  # first formation at which each member needs a block
        counts = np.maximum(0, -(-(limit - first) // size))
        members = np.repeat(np.arange(n, dtype=np.int64), counts)
        offsets = np.arange(len(members), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        iterations = np.repeat(first, counts) + offsets * size
        order = np.lexsort((members, iterations))
        iterations, members = iterations[order], members[order]
        allowed = free - 1  # every check needs a free block, so one must stay spare
        if allowed < 0:
            return np.empty(0, np.int64), np.empty(0, np.int64), 1
        if len(iterations) > allowed:
            limit = min(limit, int(iterations[allowed]))
        keep = iterations < limit
        return iterations[keep], members[keep], limit

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
        scheduler, recorder = sim.schedulers[replica], sim.recorder
        ends = run.ends[:k]
        requests, n = first.requests, len(first.requests)
        self._advance_tokens(requests, ends, recorder)
        keep = run.alloc_iteration < k
        allocations = self._allocate(scheduler, requests, run.alloc_iteration[keep], run.alloc_member[keep], ends)
        scheduler.num_batches += k - 2  # ids of the skipped iterations' batches
        last = scheduler.make_batch(list(requests), [1] * n)
        context = first.shape.decode_context + n * (k - 1) if first.shape.num_decodes else 0
        last.shape = BatchShape(n, n, (), n if first.shape.num_decodes else 0, context)
        last.formed_at = float(ends[k - 2])
        self._record(replica, run, last, allocations)
        scheduler.on_steady_decode(first, last, k)
        return last

    @staticmethod
    def _advance_tokens(requests, ends: np.ndarray, recorder) -> None:
        """Members gain one token per skipped iteration; record the gaps between tokens."""
        skipped = len(ends) - 1
        first_end = float(ends[0])
        steps = np.diff(ends[:skipped]) if skipped > 1 else np.empty(0)
        step_max = float(steps.max()) if len(steps) else 0.0
        gaps = recorder.token_gaps
        for request in requests:
            previous = request.last_token_at
            if previous >= 0.0:
                gap = first_end - previous
                gaps.append(gap)
                if gap > request.max_token_gap:
                    request.max_token_gap = gap
            if step_max > request.max_token_gap:
                request.max_token_gap = step_max
            request.num_processed_tokens += skipped
            request.last_token_at = float(ends[skipped - 1])
        if len(steps):
            recorder.weighted_gaps[0].extend(steps.tolist())
            recorder.weighted_gaps[1].extend([len(requests)] * len(steps))

    @staticmethod
    def _allocate(scheduler, requests, iterations, members, ends) -> list:
        """Take the planned blocks in slow-path order; returns (iteration, request, block)."""
        pool, made = scheduler.pool, []
        for iteration, member in zip(iterations.tolist(), members.tolist()):
            request = requests[member]
            made.append((iteration, request.id, pool.allocate_one(request)))
        return made

    def _record(self, replica: int, run: DecodeRun, last: Batch, allocations: list) -> None:
        """What the slow path records for iterations 0..k-2 and the formation of k-1: per
        iteration a stage row, the replica state after its batch end, the next formation's
        block allocations, its batch row and the replica state after that formation."""
        sim, k, first = self.sim, run.num_iterations, run.first
        recorder, pool = sim.recorder, sim.schedulers[replica].pool
        ends = run.ends[: k - 1].tolist()
        starts = [run.started_at] + ends[:-1]
        stage_ids = list(range(first.id, first.id + k - 1))
        recorder.on_stage_rows(stage_ids, replica, 0, starts, ends)
        per_formation = np.bincount([a[0] for a in allocations], minlength=k)[1:] if allocations else np.zeros(k - 1, np.int64)
        after = (pool.num_used - len(allocations) + np.cumsum(per_formation)).tolist()
        before = [pool.num_used - len(allocations)] + after[:-1]
        times = [t for t in ends for _ in (0, 1)]
        used = [u for pair in zip(before, after) for u in pair]
        if allocations:
            recorder.on_allocate_rows([ends[a[0] - 1] for a in allocations], replica,
                                      [a[1] for a in allocations], [a[2] for a in allocations])
        recorder.on_batch_rows([i + 1 for i in stage_ids], replica, ends,
                               tuple(r.id for r in first.requests), tuple(first.num_tokens))
        recorder.on_replica_states(replica, times, used, run.num_waiting, pool.num_holders)
