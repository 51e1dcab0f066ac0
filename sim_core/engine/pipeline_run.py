"""Advance a pipeline-parallel replica's decode micro-batches in one step (PP > 1).

With S pipeline stages a replica keeps up to S micro-batches in flight; each runs through the
stages in order, each stage runs one batch at a time, first come first served, and a batch that
leaves the last stage ends there and (for a static or otherwise steady batch) is formed again at
that instant, entering stage 0's queue. When the policy promises that this is all that happens
(`SteadyDecode.micro_batches`: every in-flight decode batch re-forms unchanged minus its finished
members, nothing else is formed whatever arrives, the pool does not change: FasterTransformer's
static batches with the pipeline full), the replica's future is a pure function of the stage
times until the first micro-batch's last member finishes (its static batch then ends and frees
its blocks). A pipeline run computes that timeline when the replica forms such a batch, holds one
kernel event at its end and there applies the skipped iterations in bulk, with every record the
stepwise path would have made at the same float times (docs/design/fast-forward.md, "Pipeline
runs"). Where the pipeline has room, a request arriving is formed into a new batch at once: the
run is cut at the routing instant (`on_request_routed`).

The timeline is a small event loop over stage executions (no Batch objects, no kernel events):
an execution starts when its micro-batch is ready for the stage (its previous stage ended, or
for stage 0 its previous iteration left the last stage) and the stage is free; it ends a stage
time later (the cost model's, bitwise `Simulator.stage_time`). Same-instant events of one
replica cannot reorder anything: a stage receives batches only from the stage before it (stage
0 from the last), whose executions are serial, so no two batches become ready for a stage at
one instant, and a start time is max(ready, free) whichever of two same-instant events is
handled first.

With the pipeline full, arrivals do not cut a run (the promise says they change nothing); they
only change the queue length in the replica's time series, which the run records per batch end.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sim_core.engine.fast_forward import MAX_RUN, FastForward, _live, _members
from sim_core.entities import Batch

if TYPE_CHECKING:
    from sim_core.engine.simulator import Simulator
    from sim_core.schedulers.steady import SteadyDecode


@dataclass(slots=True, eq=False)
class Lane:
    """One micro-batch of a pipeline run: `first` is its batch in flight when the run started
    (iteration 0); it runs until its members' iterations (`remaining`) are done."""

    first: Batch
    remaining: list[int]        # per member: iterations left, iteration 0 included
    order: np.ndarray           # `remaining` sorted
    suffix: np.ndarray | None   # KV tokens held by the members in `order` from position i on
    durations: list[list[float]]   # [stage][iteration] seconds
    ends: list[float] = field(default_factory=list)   # when each iteration left the last stage
    ids: list[int] = field(default_factory=list)      # batch id of each iteration

    @property
    def num_iterations(self) -> int:
        """Iterations until its last member finishes (its static batch then ends)."""
        return int(self.order[-1])


@dataclass(slots=True, eq=False)
class Timeline:
    """The stage executions of a run from its start until `end` (exclusive), and what runs and
    waits at `end`."""

    executions: tuple[list[int], list[int], list[int], list[float], list[float]]  # lane, iteration, stage, start, end
    formations: list[tuple[float, int]]   # (instant, lane) of each batch formed, in order
    running: list[tuple[int, float, float] | None]   # per stage: (lane, start, end) or idle
    queues: list[list[int]]          # per stage: the lanes queued, in order
    end: float


@dataclass(slots=True, eq=False)
class PipelineRun:
    """A planned run: `plan` is its timeline up to its end (a lane's final iteration)."""

    promise: SteadyDecode
    lanes: list[Lane]
    located: list[tuple[int, Batch, float | None]]   # the batches in flight before the new one (`_located`)
    started_at: float
    num_waiting: int                 # queue length when the run started
    plan: Timeline
    pending: list[Batch]             # batches whose stage-end events, on the kernel when it started, are still due
    token: int
    arrivals: list[float] = field(default_factory=list)   # requests routed to the replica meanwhile


class PipelineRuns:
    """Plans and completes pipeline runs for a Simulator whose replicas have several stages
    (it stands where `FastForward` stands for single-stage runs: the simulator's `fast`)."""

    def __init__(self, simulator: Simulator) -> None:
        self.sim = simulator
        self.runs: dict[int, PipelineRun] = {}
        self._tokens = 0

    # ---- the simulator's hooks (as FastForward's) -------------------------------------------

    def try_start(self, replica: int, batch: Batch) -> bool:
        """Start a run for a batch just formed on a replica whose other batches in flight are
        all located (running on a stage or queued at one, no event of theirs due now but a
        stage's schedule): False leaves it to the ordinary path."""
        sim = self.sim
        if sim.handoff is not None or sim.dp is not None or sim.overlapping[replica] or replica in self.runs:
            return False
        scheduler = sim.schedulers[replica]
        promise = scheduler.steady_decode(batch)
        if promise is None or not promise.micro_batches:
            return False
        located = self._located(replica)
        if len(located) + 1 != promise.micro_batches:
            return False
        batches = [b for _, b, _ in located] + [batch]
        if any(b.num_prefill_tokens or b.cache_seconds or b.stale is not None for b in batches):
            return False
        if sim.sessions.closed_loop and (promise.arrivals_join or any(
                sim.sessions.follower(r.id) >= 0 for b in batches for r in b.requests)):
            # a completion releases a turn at its own instant; a turn may arrive at the end of
            # an instant, after that instant's batch ends (a run cut then would differ)
            return False
        lanes = [self._lane(replica, b) for b in batches]
        shortest = min(lane.num_iterations for lane in lanes)
        if shortest < 2 or shortest > MAX_RUN:
            return False
        self._durations(replica, lanes, shortest)
        now, num_stages = sim.kernel.now, len(sim.stages[replica])
        plan = _timeline(lanes, located, now, num_stages, math.inf)
        self._tokens += 1
        run = PipelineRun(promise, lanes, located, now, scheduler.endpoint.num_waiting, plan,
                          [b for b in (stage.running for stage in sim.stages[replica] if stage.busy)
                           if b is not None], self._tokens)
        self.runs[replica] = run
        sim.kernel.at(plan.end, self.on_run_end, replica, run.token)
        return True

    def on_request_routed(self, replica: int) -> None:
        """A request joined the replica's queue. With the pipeline full the run goes on
        (nothing it does depends on the queue) and its time series counts the request from now
        (from just after now at the end of an instant, when this instant's batch ends have
        recorded theirs); with room for a batch, the request is formed into one now: the run
        ends here, in the state stepwise simulation has when the request is routed (every stage
        end up to now handled, their follow-ups not yet)."""
        run = self.runs.get(replica)
        if run is None:
            return
        kernel = self.sim.kernel
        if not run.promise.arrivals_join:
            run.arrivals.append(math.nextafter(kernel.now, math.inf) if kernel.late_phase else kernel.now)
            return
        assert not kernel.late_phase, "runs that arrivals cut are not started where a turn may arrive late"
        del self.runs[replica]
        plan = _timeline(run.lanes, run.located, run.started_at, len(self.sim.stages[replica]), kernel.now)
        self._hand_back(replica, run, plan)

    def absorbs(self, replica: int, batch: Batch) -> bool:
        """Whether a stage end belongs to a run: a batch that was running when the run started
        ends inside it (the run has accounted for it)."""
        run = self.runs.get(replica)
        if run is None:
            return False
        for i, original in enumerate(run.pending):
            if original is batch:
                del run.pending[i]
                return True
        return False

    def finished_members(self, replica: int) -> int:
        """Requests a router counting outstanding ones would see gone inside a run: none (the
        promise's blocks return only when a static batch ends, which ends the run)."""
        return 0

    # ---- planning ----------------------------------------------------------------------------

    def _located(self, replica: int) -> list[tuple[int, Batch, float | None]]:
        """The replica's batches in flight as (stage, batch, when it started there or None
        when queued), per stage the running one first, then its queue in order. A stage that
        is idle with a queue has a schedule due now (queued by the arrival that filled it),
        which starts the head now: the run starts it so (and the simulator drops that schedule
        while the run lasts). A batch between stages, or between its last stage and its batch
        end, is in no list: the caller's count of batches in flight catches it."""
        located: list[tuple[int, Batch, float | None]] = []
        now = self.sim.kernel.now
        for k, stage in enumerate(self.sim.stages[replica]):
            queue = list(stage.queue)
            if stage.busy:
                assert stage.running is not None, "stages of several-stage replicas start through start_next"
                located.append((k, stage.running, stage.started_at))
            elif queue:
                located.append((k, queue.pop(0), now))
            located += [(k, queued, None) for queued in queue]
        return located

    def _lane(self, replica: int, batch: Batch) -> Lane:
        requests = batch.requests
        remaining = [r.num_prefill_tokens + r.num_decode_tokens - r.num_processed_tokens for r in requests]
        order, suffix = _members(batch, remaining, self.sim.predictors[replica].needs_context)
        return Lane(batch, remaining, order, suffix, [])

    def _durations(self, replica: int, lanes: list[Lane], shortest: int) -> None:
        """Stage times of each lane's iterations: iteration 0 as the simulator prices its batch,
        later ones with the cost model's decode-run pricing (bitwise the same), as far as the
        run can reach (a lane is never more than one iteration ahead of another)."""
        sim, predictor = self.sim, self.sim.predictors[replica]
        num_stages = len(sim.stages[replica])
        for lane in lanes:
            count = min(lane.num_iterations, shortest + 3)
            counts, context = _live(lane.order, lane.suffix, np.arange(1, count, dtype=np.int64), 0)
            lane.durations = [[sim.stage_time(replica, lane.first, k)]
                              + predictor.decode_run_times(counts, context, k).tolist() for k in range(num_stages)]

    # ---- the end -----------------------------------------------------------------------------

    def on_run_end(self, replica: int, token: int) -> None:
        """A lane's final iteration leaves the last stage now: the run ends."""
        run = self.runs.get(replica)
        if run is None or run.token != token:
            return   # cut by an arrival
        del self.runs[replica]
        self._hand_back(replica, run, run.plan)

    def _hand_back(self, replica: int, run: PipelineRun, plan: Timeline) -> None:
        """Apply the run up to `plan.end` (now) and hand the replica back as stepwise simulation
        holds it at this point of the instant: every event before now handled, and the stage
        ends due now handled here (their follow-ups queued), as the kernel would have."""
        sim, scheduler = self.sim, self.sim.schedulers[replica]
        base = scheduler.num_batches
        for lane in run.lanes:
            lane.ids = [lane.first.id]
        for i, (_, m) in enumerate(plan.formations):
            run.lanes[m].ids.append(base + i)
        scheduler.num_batches = base + len(plan.formations)
        self._record(replica, run, plan)
        current = [self._advance(replica, run, lane) for lane in run.lanes]
        due = []
        for k, stage in enumerate(sim.stages[replica]):
            stage.queue = deque(current[m] for m in plan.queues[k])
            slot = plan.running[k]
            stage.busy = slot is not None
            if slot is None:
                stage.running = None
                continue
            m, started, end = slot
            batch = stage.running = current[m]
            stage.started_at = started
            if end == plan.end:
                due.append((k, batch))
            elif not any(original is batch for original in run.pending):   # (else its event is still due)
                sim.kernel.at(end, sim.on_stage_end, replica, k, batch)
        for k, batch in due:
            sim.on_stage_end(replica, k, batch)

    def _advance(self, replica: int, run: PipelineRun, lane: Lane) -> Batch:
        """Apply a lane's iterations that ended inside the run (tokens, token gaps, completions)
        and return its batch in flight now (formed at its last batch end)."""
        done = len(lane.ends)
        if not done:
            return lane.first
        members, sim = lane.first.requests, self.sim
        ends = np.array([*lane.ends, 0.0])   # _advance_tokens applies all but the last slot
        FastForward._advance_tokens(members, lane.remaining, ends, sim.recorder, lane.order)
        finished = sorted((left, i) for i, left in enumerate(lane.remaining) if left <= done)
        for left, i in finished:
            sim.recorder.on_finished_at(lane.ends[left - 1], replica, members[i].id, [])
        live = [r for r, left in zip(members, lane.remaining) if left > done]
        batch = Batch(lane.ids[done], replica, live, [1] * len(live), 0)
        batch.shape = sim.batch_shape(batch)
        batch.formed_at = lane.ends[done - 1]
        run.promise.moved(lane.first, batch, done + 1)
        return batch

    def _record(self, replica: int, run: PipelineRun, plan: Timeline) -> None:
        """The stage rows, batch rows and time series the stepwise path makes inside the run."""
        recorder, pool = self.sim.recorder, self.sim.schedulers[replica].pool
        if recorder.keeps_batches:
            lanes, iterations, stages, starts, ends = plan.executions
            ids = np.array([run.lanes[m].ids[j] for m, j in zip(lanes, iterations)], dtype=np.int64)
            # (Recorder.on_run_stages writes stage 0 only: single-stage runs)
            recorder.stages.add_chunk(len(ids), batch_id=ids, replica_id=replica,
                                      stage_id=np.asarray(stages, dtype=np.int64),
                                      start=np.asarray(starts, dtype=np.float64),
                                      end=np.asarray(ends, dtype=np.float64))
            for lane in run.lanes:
                self._record_batches(replica, lane)
        if not plan.formations:
            return
        times = np.array([time for time, _ in plan.formations])   # every batch end inside the run, in order
        waiting = run.num_waiting + np.searchsorted(np.asarray(run.arrivals), times, side="right")
        used, holders = pool.num_used, pool.num_holders
        cuts = np.flatnonzero(np.diff(waiting)) + 1
        for segment in np.split(np.arange(len(times)), cuts):
            at = times[segment].repeat(2)   # after the batch end, after the formation
            recorder.on_replica_states(replica, at, np.full(len(at), used, dtype=np.int64), int(waiting[segment[0]]),
                                       np.full(len(at), holders, dtype=np.int64), sequential=True)

    def _record_batches(self, replica: int, lane: Lane) -> None:
        """Batch rows of the lane's formations inside the run, one chunk per set of live members."""
        done = len(lane.ends)
        if not done:
            return
        ids = [m.id for m in lane.first.requests]
        with_context = self.sim.predictors[replica].needs_context
        formations = np.arange(1, done + 1, dtype=np.int64)
        contexts = _live(lane.order, lane.suffix, formations, 0)[1]
        batch_ids = np.asarray(lane.ids[1:], dtype=np.int64)
        formed = np.asarray(lane.ends)
        boundaries = sorted({left for left in lane.remaining if 1 < left <= done})
        boundaries.append(done + 1)
        start = 1
        for boundary in boundaries:
            live = tuple([i for i, left in zip(ids, lane.remaining) if left > start])
            self.sim.recorder.on_run_batches(
                boundary - start, batch_id=batch_ids[start - 1: boundary - 1], replica_id=replica,
                formed_at=formed[start - 1: boundary - 1], num_requests=len(live), num_tokens=len(live),
                num_prefill_tokens=0, num_decodes=len(live) if with_context else 0,
                decode_context=contexts[start - 1: boundary - 1], request_ids=live,
                request_tokens=(1,) * len(live), padded_size=len(live))
            start = boundary


def _timeline(lanes: list[Lane], located: list[tuple[int, Batch, float | None]], now: float, num_stages: int,
              until: float) -> Timeline:
    """Run the stage executions forward from `now` (when the last lane's batch was formed, the
    others being where `located` says) until a lane's final iteration leaves the last stage or
    until `until`, whichever comes first: that instant is the timeline's end. Events at one
    instant are taken with a lane's final one first, so every event before the end is handled
    and none at it. Fills each lane's `ends` (its batch ends before the end)."""
    heap: list[tuple[float, int, int, int, int]] = []   # (end, not final, seq, lane, stage)
    iteration = [0] * len(lanes)
    started = [0.0] * len(lanes)
    busy: list[int | None] = [None] * num_stages
    queues: list[deque[int]] = [deque() for _ in range(num_stages)]
    ex_lane: list[int] = []
    ex_iter: list[int] = []
    ex_stage: list[int] = []
    ex_start: list[float] = []
    ex_end: list[float] = []
    formations: list[tuple[float, int]] = []
    last, seq = num_stages - 1, 0
    finals = [lane.num_iterations - 1 for lane in lanes]
    for lane in lanes:
        lane.ends = []
    durations = [lane.durations for lane in lanes]

    def start(m: int, k: int, time: float) -> None:
        nonlocal seq
        seq += 1
        busy[k], started[m] = m, time
        j = iteration[m]
        heapq.heappush(heap, (time + durations[m][k][j], 0 if k == last and j == finals[m] else 1, seq, m, k))

    for m, (k, _, since) in enumerate(located):   # lane m is located[m]'s batch
        if since is None:
            queues[k].append(m)
        else:
            start(m, k, since)
    new = len(lanes) - 1   # the batch just formed enters stage 0
    if busy[0] is None:
        start(new, 0, now)
    else:
        queues[0].append(new)
    while True:
        end, not_final, _, m, k = heapq.heappop(heap)
        if not not_final or end >= until:
            break
        ex_lane.append(m)
        ex_iter.append(iteration[m])
        ex_stage.append(k)
        ex_start.append(started[m])
        ex_end.append(end)
        busy[k] = None
        if queues[k]:
            start(queues[k].popleft(), k, end)
        if k == last:   # the batch ends; the policy forms its next iteration now
            lanes[m].ends.append(end)
            iteration[m] += 1
            formations.append((end, m))
            k = -1
        if busy[k + 1] is None:
            start(m, k + 1, end)
        else:
            queues[k + 1].append(m)
    heapq.heappush(heap, (end, not_final, 0, m, k))
    running: list[tuple[int, float, float] | None] = [None] * num_stages
    for end_k, _, _, m_k, stage in heap:
        running[stage] = (m_k, started[m_k], end_k)
    return Timeline((ex_lane, ex_iter, ex_stage, ex_start, ex_end), formations, running, [list(q) for q in queues],
                    min(end, until))
