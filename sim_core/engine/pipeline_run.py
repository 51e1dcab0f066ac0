"""Advance a pipeline-parallel replica's decode micro-batches in one step (PP > 1).

With S pipeline stages a replica keeps up to S micro-batches in flight; each runs through the
stages in order, each stage runs one batch at a time, first come first served, and a batch that
leaves the last stage ends there and (for a static or otherwise steady batch) is formed again at
that instant, entering stage 0's queue. When the policy promises that this is all that happens
(`SteadyDecode.micro_batches`: every in-flight decode batch re-forms unchanged minus its finished
members, nothing else is formed, the pool does not change: FasterTransformer's static batches),
the replica's future is a pure function of the stage times until the first micro-batch's last
member finishes (its static batch then ends and frees its blocks). A pipeline run computes that
timeline (in chunks) from when the replica forms such a batch, holds one kernel event at the end
of what is computed and at its end applies the skipped iterations in bulk, with every record the
stepwise path would have made at the same float times (docs/design/fast-forward.md, "Pipeline
runs"). Where the pipeline has room, a request arriving is formed into a new batch at once: the
run is cut at the routing instant (`on_request_routed`).

The timeline is computed by `engine/pipeline_timeline.py`.

With the pipeline full, arrivals do not cut a run (the promise says they change nothing); they
only change the queue length in the replica's time series, which the run records per batch end.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sim_core.engine.fast_forward import FIRST_CHUNK, MAX_RUN
from sim_core.engine.pipeline_timeline import Lane, Timeline
from sim_core.engine.run_members import advance_tokens, live_members, member_order, record_run_batches
from sim_core.entities import Batch
from sim_core.schedulers.base import UNBOUNDED

if TYPE_CHECKING:
    from sim_core.engine.simulator import Simulator
    from sim_core.schedulers.steady import SteadyDecode


# iterations priced beyond the shortest lane's: a lane is never more than one iteration ahead
# of another, so one would do; the margin costs a few prices per lane
REACH_SLACK = 3


@dataclass(slots=True, eq=False)
class PipelineRun:
    """A planned run: `plan` is its timeline as far as computed (to a lane's final iteration
    at most); `located` and the lanes keep what a cut recomputes it from."""

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
        self._last_length: dict[int, int] = {}   # replica -> executions its last run computed

    # ---- the simulator's hooks (as FastForward's) -------------------------------------------

    def try_start(self, replica: int, batch: Batch) -> bool:
        """Start a run for a batch just formed on a replica whose other batches in flight are
        all located (running on a stage or queued at one, no event of theirs due now but a
        stage's schedule): False leaves it to the ordinary path."""
        sim = self.sim
        if sim.handoff is not None or sim.dp is not None or sim.overlapping[replica] or replica in self.runs:
            return False
        scheduler = sim.schedulers[replica]
        if not scheduler.traits.pipeline_runs:
            return False
        promise = scheduler.steady_decode(batch)
        if promise is None or not promise.micro_batches:
            return False
        # what a run models today: static batches (no limit, no KV growth, no padding, blocks
        # returned with the whole batch); a policy promising more must be modelled first
        assert (promise.limit == UNBOUNDED and promise.growth is None and promise.padded_sizes is None
                and promise.past_completions and not promise.frees_on_completion), \
            "pipeline runs model static batches only"
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
        plan = Timeline(lanes, located, now, num_stages, sim.recorder.keeps_batches)
        plan.advance(math.inf, max(FIRST_CHUNK, 2 * self._last_length.get(replica, 0)))
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
        plan = Timeline(run.lanes, run.located, run.started_at, len(self.sim.stages[replica]),
                        self.sim.recorder.keeps_batches)
        plan.advance(kernel.now, run.plan.count)   # (recomputed up to now: it ran past it)
        self._last_length[replica] = plan.count
        self._hand_back(replica, run, plan)

    def holds_slot(self, replica: int) -> bool:
        """`FastForward.holds_slot`: never (a pipeline run's arrivals are formed as stepwise)."""
        return False

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
        order, suffix = member_order(batch, remaining, self.sim.predictors[replica].needs_context)
        return Lane(batch, remaining, order, suffix, [])

    def _durations(self, replica: int, lanes: list[Lane], shortest: int) -> None:
        """Stage times of each lane's iterations: iteration 0 as the simulator prices its batch,
        later ones with the cost model's decode-run pricing (bitwise the same), as far as the
        run can reach (a lane is never more than one iteration ahead of another)."""
        sim, predictor = self.sim, self.sim.predictors[replica]
        num_stages = len(sim.stages[replica])
        for lane in lanes:
            count = min(lane.num_iterations, shortest + REACH_SLACK)
            counts, context = live_members(lane.order, lane.suffix, np.arange(1, count, dtype=np.int64), 0)
            lane.durations = [[sim.stage_time(replica, lane.first, k)]
                              + predictor.decode_run_times(counts, context, k).tolist() for k in range(num_stages)]

    # ---- the end -----------------------------------------------------------------------------

    def on_run_end(self, replica: int, token: int) -> None:
        """The run got to the end of its timeline as far as computed: a lane's final iteration
        leaves the last stage now (the run ends), or the timeline goes on (twice as far)."""
        run = self.runs.get(replica)
        if run is None or run.token != token:
            return   # cut by an arrival
        plan = run.plan
        if not plan.final:
            plan.advance(math.inf, 2 * plan.count)
            self.sim.kernel.at(plan.end, self.on_run_end, replica, token)
            return
        del self.runs[replica]
        self._last_length[replica] = plan.count
        self._hand_back(replica, run, plan)

    def _hand_back(self, replica: int, run: PipelineRun, plan: Timeline) -> None:
        """Apply the run up to `plan.end` (now) and hand the replica back as stepwise simulation
        holds it at this point of the instant: every event before now handled, and the stage
        ends due now handled here (their follow-ups queued), as the kernel would have."""
        sim, scheduler = self.sim, self.sim.schedulers[replica]
        base = scheduler.num_batches
        formed = np.asarray(plan.formed, dtype=np.int64)   # batch ids follow the formations' order
        for m, (lane, ends) in enumerate(zip(run.lanes, plan.lanes_done)):
            lane.ends = ends
            lane.ids = np.concatenate(([lane.first.id], base + np.flatnonzero(formed == m)))
        scheduler.num_batches = base + len(formed)
        self._record(replica, run, plan)
        current = [self._advance(replica, run, lane) for lane in run.lanes]
        due, running = [], plan.running()
        for k, stage in enumerate(sim.stages[replica]):
            stage.queue = deque(current[m] for m in plan.queues[k])
            slot = running[k]
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
        ends = np.array([*lane.ends, 0.0])   # advance_tokens applies all but the last slot
        advance_tokens(members, lane.remaining, ends, sim.recorder, lane.order)
        finished = sorted((left, i) for i, left in enumerate(lane.remaining) if left <= done)
        for left, i in finished:
            sim.recorder.on_finished_at(lane.ends[left - 1], replica, members[i].id, [])
        live = [r for r, left in zip(members, lane.remaining) if left > done]
        batch = Batch(int(lane.ids[done]), replica, live, [1] * len(live), 0)
        batch.shape = sim.batch_shape(batch)
        batch.formed_at = lane.ends[done - 1]
        run.promise.moved(lane.first, batch, done + 1)
        return batch

    def _record(self, replica: int, run: PipelineRun, plan: Timeline) -> None:
        """The stage rows, batch rows and time series the stepwise path makes inside the run."""
        recorder, pool = self.sim.recorder, self.sim.schedulers[replica].pool
        if recorder.keeps_batches:
            lanes, iterations, stages, starts, ends = plan.columns()
            ids = np.empty(len(lanes), dtype=np.int64)
            for m, lane in enumerate(run.lanes):
                mine = lanes == m
                ids[mine] = lane.ids[iterations[mine]]
            recorder.on_run_stages(replica, ids, starts, ends, stages)
            for lane in run.lanes:
                self._record_batches(replica, lane)
        if not plan.formed_at:
            return
        times = np.array(plan.formed_at)   # every batch end inside the run, in order
        waiting = run.num_waiting + np.searchsorted(np.asarray(run.arrivals), times, side="right")
        used, holders = pool.num_used, pool.num_holders
        cuts = np.flatnonzero(np.diff(waiting)) + 1
        for segment in np.split(np.arange(len(times)), cuts):
            at = times[segment].repeat(2)   # after the batch end, after the formation
            recorder.on_replica_states(replica, at, np.full(len(at), used, dtype=np.int64), int(waiting[segment[0]]),
                                       np.full(len(at), holders, dtype=np.int64), sequential=True)

    def _record_batches(self, replica: int, lane: Lane) -> None:
        """Batch rows of the lane's formations inside the run (formation f formed at its batch end f-1)."""
        done = len(lane.ends)
        if done:
            record_run_batches(self.sim.recorder, replica, lane.first, lane.remaining, lane.order, lane.suffix, 0, 1,
                               lane.ids[1: done + 1], np.asarray(lane.ends),
                               self.sim.predictors[replica].needs_context, _unpadded)


def _unpadded(num_requests: int) -> int:
    """Static batches run unpadded."""
    return num_requests
