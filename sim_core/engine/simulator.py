"""The three-tier simulation: global router -> replica schedulers -> pipeline stages.

Each handler mirrors one of Vidur's events and schedules its follow-ups on the kernel:

    arrival -> global schedule -> replica schedule -> stage arrival -> stage schedule
    -> stage end -> (stage schedule; next stage arrival | batch end) -> replica schedule

With one stage per replica (PP = 1) the stage arrival and stage schedule events are no-ops (the
only stage is idle whenever a batch forms, and nothing else can queue there), so a formation
starts its stage directly and a stage end schedules the batch end directly; the batch end and
the next formation keep their place behind everything already due, exactly as in Vidur.
With several stages and no pipeline runs (fast-forward on: vllm, sarathi, orca, vllm_v0, ... at
PP > 1), `enter_stages` prices a batch's whole path through the stages when it forms (each stage
first come first served) and holds one event for its batch end, where the stage events would
have queued it: the same times and order as those events, without them (`_path_stages` says where).

Two optional parts hook in here: closed-loop sessions (`cluster/sessions.py`: a completion
releases the session's next turn) and P/D disaggregation (`cluster/handoff.py`: prefill replicas
hand requests to decode replicas). Arrivals go to the first pool's replicas (all replicas without pools).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sim_core.cluster.sessions import SessionChains
from sim_core.engine.fast_forward import FastForward, RunView
from sim_core.engine.kernel import EventKernel
from sim_core.engine.overlap import OverlapClock
from sim_core.engine.pipeline_run import PipelineRuns
from sim_core.engine.stage import Stage
from sim_core.entities import Batch, Request, RequestStatus
from sim_core.predictor import BatchShape, Predictor, padded, shape_of
from sim_core.results.record import ADMITTED, FINISHED, QUEUED, Recorder
from sim_core.results.request_log import RequestLog

if TYPE_CHECKING:
    from sim_core.cluster.handoff import Disaggregation
    from sim_core.engine.dp_group import DpLockstep
    from sim_core.engine.routing import Queued, Router
    from sim_core.predictor.kv_copy import KvCopyCost
    from sim_core.schedulers import ReplicaScheduler
    from sim_core.workload.model import Workload

PROGRESS_STEPS = 4096  # simulated instants between two progress reports (and stop polls)
SWEEP_EVERY = 4096  # arrivals between sweeps that retire finished requests (bounded memory)


class Simulator:
    """Owns the replicas, the router and the kernel for one run (no state outside it)."""

    def __init__(self, schedulers: list[ReplicaScheduler], router: Router, predictors: Sequence[Predictor],
                 workload: Workload, recorder: Recorder, fast_forward: bool = True, num_entry: int | None = None,
                 kv_copy_cost: KvCopyCost | None = None) -> None:
        """`predictors[r]` prices replica r's batches; arrivals are routed to replicas
        0..num_entry-1 (default: all); `kv_copy_cost` prices vllm_v0's KV swaps and copies."""
        self.kernel = EventKernel()
        self.kernel.on_late = self._set_late
        self.schedulers = schedulers
        self.entry: list[Queued] = [s.endpoint for s in (schedulers if num_entry is None else schedulers[:num_entry])]
        self.stages = [[Stage(s.replica_id, k, k == s.num_stages - 1) for k in range(s.num_stages)]
                       for s in schedulers]
        self.router, self.predictors, self.workload, self.recorder = router, predictors, workload, recorder
        self.live: dict[int, Request] = {}   # arrived and not yet retired, by id
        self.request_log = RequestLog(len(workload))
        self.pending_routing: list[Request] = []
        self.sessions = SessionChains([])
        self.handoff: Disaggregation | None = None   # a Disaggregation when the run has prefill and decode pools
        self.dp: DpLockstep | None = None   # MoE with attention DP: ranks step together (engine/dp_group.py)
        self._heads: list[int] = []     # requests that arrive at their workload time
        self._num_arrived = 0
        self.single_stage = all(s.num_stages == 1 for s in schedulers)
        # decode runs: single-stage ones (engine/fast_forward.py), or pipelines (engine/pipeline_run.py)
        self.fast: FastForward | PipelineRuns | None = None
        if fast_forward and self.single_stage:
            self.fast = FastForward(self)
        elif fast_forward and any(s.traits.pipeline_runs for s in schedulers):
            self.fast = PipelineRuns(self)
        if self.fast is not None and router.reads == "outstanding":   # see engine/routing.py
            self.entry = [RunView(endpoint, self.fast, r) for r, endpoint in enumerate(self.entry)]
        self.overlapping = [s.config.overlap_schedule(s.num_stages) for s in schedulers]   # per replica
        # per replica of several stages, when each stage is next free, where `enter_stages` prices
        # a batch's whole path when it forms (`run` decides; None: every stage event is simulated)
        self.stage_paths: list[list[float] | None] | None = None
        self._arrival_instants: set[float] | None = None   # with stage paths: every arrival's time, if all known
        self._price_paths = fast_forward and self.fast is None and not self.single_stage
        self.overlap = (OverlapClock(predictors, [s.config.overlapped_cpu_phases() for s in schedulers])
                        if any(self.overlapping) else None)
        self.kv_copy_cost = kv_copy_cost  # prices the KV swaps / copies a batch runs first (vllm_v0)
        # parallel samples per request, for policies that serve them (the others serve one each)
        self.num_seqs = workload.n if workload.n is not None and schedulers[0].traits.serves_parallel_samples else None

    def run(self, sessions: SessionChains, after_event: Callable[[Simulator], None] | None = None,
            progress: Callable[[float], None] | None = None, poll: Callable[[float], None] | None = None) -> None:
        """Simulate: `sessions.heads` arrive at their workload times, later turns of closed-loop
        sessions when released; `after_event(simulator)` runs after every event when given (tests
        check invariants); `poll(simulated_seconds)` then `progress(simulated_seconds)` now and
        then (every PROGRESS_STEPS distinct times; `poll` may raise to stop the run, e.g.
        run_watch.StopCheck). Without both, the clock costs one assignment per instant."""
        self.sessions, self._heads = sessions, sessions.heads
        times = self.workload.arrived_at[self._heads].tolist()
        if self._price_paths:
            self.stage_paths = [self._path_stages(r) for r in range(len(self.schedulers))]
            self._arrival_instants = None if sessions.closed_loop else set(times)   # (turns arrive when released)
        check = (lambda: after_event(self)) if after_event is not None else None
        on_time = self._set_time if progress is None and poll is None else self._reporting_clock(progress, poll)
        self.kernel.run(times, self.on_arrival, on_time, check)

    def _path_stages(self, replica: int) -> list[float] | None:
        """The stages' free times `enter_stages` starts from, where a batch's whole path can be
        priced when it forms: nothing outside the stages reads them (no pipeline run), a stage
        time does not depend on when it starts (no overlapped CPU phases), and no other event of
        the replica can fall at a batch end's instant, whose order against it would follow the
        stage events' creation (no P/D hand-off, no KV loads from a CPU tier). None: not here."""
        scheduler = self.schedulers[replica]
        if self.handoff is not None or self.overlapping[replica] or scheduler.endpoint.loads_from_cpu_tier:
            return None
        return [-math.inf] * scheduler.num_stages   # idle since ever

    def _reporting_clock(self, progress: Callable[[float], None] | None,
                         poll: Callable[[float], None] | None) -> Callable[[float], None]:
        steps = 0
        recorder = self.recorder

        def on_time(now: float) -> None:
            nonlocal steps
            recorder.now = now   # `_set_time`, inline (once per simulated instant)
            recorder.late = False
            steps += 1
            if steps % PROGRESS_STEPS == 0:
                if poll is not None:
                    poll(now)
                if progress is not None:
                    progress(now)
        return on_time

    def _set_time(self, now: float) -> None:
        """The kernel's clock moved to `now`: records made from here on carry it (the only writer
        of `Recorder.now`, but for fast-forward replaying a run's radix-pool formations)."""
        self.recorder.now = now
        self.recorder.late = False

    def _set_late(self) -> None:
        """The end of the current instant began: state records made from here on sort after
        the instant's others (as a run's completions recorded later at this instant must)."""
        self.recorder.late = True

    # ---- tier 1: arrivals and routing ------------------------------------------------------

    def on_arrival(self, index: int) -> None:
        rid = self._heads[index]
        self._arrive(rid, float(self.workload.arrived_at[rid]))

    def on_turn_arrival(self, rid: int, time: float) -> None:
        """A closed-loop session's next turn, released by its previous turn's completion."""
        self._arrive(rid, time)

    def _arrive(self, rid: int, time: float) -> None:
        w = self.workload
        request = Request(rid, time, int(w.num_prefill_tokens[rid]), int(w.num_decode_tokens[rid]))
        if self.num_seqs is not None:
            request.num_seqs = int(self.num_seqs[rid])
        self.live[rid] = request
        self.pending_routing.append(request)
        self.kernel.soon(self.on_global_schedule)
        self._num_arrived += 1
        if self._num_arrived % SWEEP_EVERY == 0:
            self.sweep()

    def sweep(self) -> None:
        """Retire finished requests: their figures go to the request log, the objects are freed
        (a finished request never changes again); token gaps are compacted likewise."""
        live, finished = self.live, RequestStatus.FINISHED
        done = [r for r in live.values() if r.status >= finished]
        for request in done:
            del live[request.id]
        self.request_log.record_many(done)
        self.recorder.compact_gaps()

    @property
    def requests(self) -> list[Request]:
        """Requests that arrived and were not retired yet (in flight, or finished recently)."""
        return list(self.live.values())

    def on_global_schedule(self) -> None:
        touched = set()
        for request in self.pending_routing:
            replica = self.router.route(request, self.entry)
            self.schedulers[replica].add_request(request)
            self.recorder.on_state(replica, request.id, QUEUED)
            if self.fast is not None:
                self.fast.on_request_routed(replica)
            touched.add(replica)
        self.pending_routing.clear()
        for replica in sorted(touched):
            if self.fast is None or not self.fast.holds_slot(replica):
                self.kernel.soon(self.on_replica_schedule, replica)

    # ---- tier 2: replica scheduling --------------------------------------------------------

    def on_replica_schedule(self, replica: int) -> None:
        scheduler = self.schedulers[replica]
        if self.handoff is not None and not self.handoff.is_prefill(replica) and scheduler.endpoint.can_pull():
            self.handoff.pull(replica)
        batches = scheduler.on_schedule()
        for request, seconds in scheduler.endpoint.take_loads():   # KV offload: loads from the CPU tier
            self.kernel.at(self.kernel.now + seconds, self.on_load_done, replica, request)
        if not batches:
            return
        now, record = self.kernel.now, self.recorder
        for batch in batches:
            batch.formed_at = now
            batch.shape = self.batch_shape(batch)
            if batch.cache_ops is not None:
                self._price_cache_ops(replica, batch)
            queued = self.single_stage and self.stages[replica][0].busy   # vllm_v1 async: behind the running step
            if not queued:
                self._on_start(replica, batch)
            record.on_batch(batch)
            if self.fast is not None and self.fast.try_start(replica, batch):
                continue
            if queued:
                self.stages[replica][0].add(batch)
            elif self.single_stage:
                self._start_stage(replica, self.stages[replica][0], batch)
            else:
                self.enter_stages(replica, batch)
        self.record_replica(scheduler)

    def on_load_done(self, replica: int, request: Request) -> None:
        """A request's KV blocks arrived from the CPU tier: the replica may admit it now (a
        fast-forwarded run is cut as for an arrival)."""
        self.schedulers[replica].endpoint.on_load_done(request)
        if self.fast is not None:
            self.fast.on_request_routed(replica)
        self.kernel.soon(self.on_replica_schedule, replica)

    def _on_start(self, replica: int, batch: Batch) -> None:
        """The batch's requests are scheduled now: when it is formed, or (queued behind a running
        step on its only stage) when that stage takes it."""
        now, record, stale = self.kernel.now, self.recorder, batch.stale
        for request in batch.requests:
            if stale is not None and request.id in stale:   # preempted before the step started
                request.on_preempted_step_start(now)
                continue
            if not request.scheduled:   # (on_batch_schedule changes nothing for a scheduled request)
                record.on_state(replica, request.id, ADMITTED)
                request.on_batch_schedule(now)

    def _price_cache_ops(self, replica: int, batch: Batch) -> None:
        """Price and record the KV swaps / copies the batch runs before its model; their time
        adds to every stage of the batch (`cache_seconds`)."""
        total = 0.0
        assert batch.cache_ops is not None and self.kv_copy_cost is not None, "vllm_v0 runs carry both"
        for kind, request_id, num_blocks in batch.cache_ops.ordered():
            seconds = self.kv_copy_cost.seconds(kind, num_blocks)
            self.recorder.on_cache_op(replica, batch.id, request_id, kind, num_blocks, seconds)
            total += seconds
        batch.cache_seconds = total

    def batch_shape(self, batch: Batch) -> BatchShape:
        """What the cost model sees of a batch about to run (token totals, or full detail)."""
        if self.predictors[batch.replica_id].needs_context:
            shape = shape_of(batch.requests, batch.num_tokens)
        else:
            shape = BatchShape(len(batch.num_tokens), sum(batch.num_tokens))
        return padded(shape, batch.num_padding) if batch.num_padding else shape

    def on_batch_end(self, replica: int, batch: Batch) -> None:
        now, on_gap, stale = self.kernel.now, self.recorder.on_token_gap, batch.stale
        if stale is None:   # (every batch but some of vllm_v1's async steps): the loop without the test
            for request, tokens in zip(batch.requests, batch.num_tokens):
                gap = request.on_batch_end(now, tokens)
                if gap >= 0.0:
                    on_gap(gap)
                if request.completed:
                    self.on_request_done(replica, request)
        else:
            for request, tokens in zip(batch.requests, batch.num_tokens):
                if request.id in stale:   # preempted while the batch ran
                    if not stale[request.id]:
                        continue
                    gap = request.on_stale_token(now)
                else:
                    gap = request.on_batch_end(now, tokens)
                if gap >= 0.0:
                    on_gap(gap)
                if request.completed:
                    self.on_request_done(replica, request)
        batch.completed_at = now
        scheduler = self.schedulers[replica]
        scheduler.on_batch_end(batch)
        if self.handoff is not None and self.handoff.is_prefill(replica):
            self.handoff.on_prefill_batch_end(replica, batch)
        self.record_replica(scheduler)
        self.kernel.soon(self.on_replica_schedule, replica)

    def on_request_done(self, replica: int, request: Request) -> None:
        """A request on `replica` has just finished: record it and release its session's next turn."""
        self.recorder.on_state(replica, request.id, FINISHED)
        if self.sessions.closed_loop:
            self.sessions.release(request.id, self.kernel.now, self.kernel, self.on_turn_arrival)

    def record_replica(self, scheduler: ReplicaScheduler) -> None:
        """Record a replica's KV blocks in use and queue lengths, now (at a level that keeps no
        time series, only the blocks in use: `Recorder.on_kv_state`)."""
        recorder = self.recorder
        if recorder.keeps_batches:
            recorder.on_replica_state(scheduler.replica_id, scheduler.pool.num_used, scheduler.endpoint.num_waiting,
                                      scheduler.pool.num_holders)
        else:
            recorder.on_kv_state(scheduler.replica_id, scheduler.pool.num_used)

    # ---- tier 3: pipeline stages -----------------------------------------------------------

    def enter_stages(self, replica: int, batch: Batch) -> None:
        """A batch formed now on a replica whose stages are not fast-forwarded by `_start_stage`
        (PP > 1): priced through every stage at once where `stage_paths` allows, else it
        reaches stage 0 as a stage arrival event."""
        free_at = self.stage_paths[replica] if self.stage_paths is not None else None
        if free_at is None:
            self.kernel.soon(self.on_stage_arrival, replica, 0, batch)
            return
        # Each stage runs its batches first come first served in formation order (a stage's
        # queue fills in the order the stage before empties), so a batch starts stage k at
        # max(its end on stage k - 1, the stage's previous end) and ends `stage_time` later:
        # the same floats the stage events compute (`now + duration`, now being that max).
        time, shape, extra = self.kernel.now, batch.shape, batch.cache_seconds
        assert shape is not None, "set when the batch is formed"
        predictor, recorder = self.predictors[replica], self.recorder
        for k, free in enumerate(free_at):
            start = free if free > time else time
            time = start + (predictor.stage_time(shape, k) + extra)
            free_at[k] = time
            if recorder.keeps_batches:   # (the stage rows: sorted by start when the result is built)
                recorder.on_stage(batch.id, replica, k, start, time)
        instants = self._arrival_instants
        if instants is not None and time not in instants:
            # nothing is routed at that instant, so the batch end may run before the other events
            # then rather than after them: they are other replicas' (whose order against it
            # changes nothing) and, from its own replica, none (see `_path_stages`)
            self.kernel.at(time, self.on_batch_end, replica, batch)
        else:
            self.kernel.at(time, self.on_stages_left, replica, batch)

    def on_stages_left(self, replica: int, batch: Batch) -> None:
        """A batch priced by `enter_stages` leaves its last stage now: its batch end follows
        where the last stage's end event puts it (after everything already due now: the
        routing of this instant's arrivals comes first)."""
        self.kernel.soon(self.on_batch_end, replica, batch)

    def on_stage_arrival(self, replica: int, stage: int, batch: Batch) -> None:
        self.stages[replica][stage].add(batch)
        self.kernel.soon(self.on_stage_schedule, replica, stage)

    def on_stage_schedule(self, replica: int, stage: int) -> None:
        if self.fast is not None and self.fast.runs and replica in self.fast.runs:
            return   # a pipeline run started the batch this schedule would start (pipeline_run.py)
        state = self.stages[replica][stage]
        batch = state.start_next(self.kernel.now)
        if batch is not None:
            duration = self.stage_time(replica, batch, stage)
            self.kernel.at(self.kernel.now + duration, self.on_stage_end, replica, stage, batch)

    def _start_stage(self, replica: int, state: Stage, batch: Batch) -> None:
        """PP = 1: the only stage is idle whenever a batch forms; run the batch on it now."""
        assert not state.busy
        if self.dp is not None:   # the rank's DP group starts it with the other ranks' steps
            return self.dp.submit(replica, batch)
        now = self.kernel.now
        state.start(now)
        self.kernel.at(now + self.stage_time(replica, batch, 0), self.on_stage_end, replica, 0, batch)

    def stage_time(self, replica: int, batch: Batch, stage: int) -> float:
        """How long `batch` runs on `stage` of `replica` starting now (KV swaps and copies it
        runs first included)."""
        shape = batch.shape
        assert shape is not None, "set when the batch is formed"
        if self.overlap is not None and self.overlapping[replica]:
            return self.overlap.iteration_time(replica, shape, self.kernel.now) + batch.cache_seconds
        return self.predictors[replica].stage_time(shape, stage) + batch.cache_seconds

    def on_stage_end(self, replica: int, stage: int, batch: Batch) -> None:
        if self.fast is not None and self.fast.runs and self.fast.absorbs(replica, batch):
            return   # a run accounts for this stage end (vllm_v1's async steps; a pipeline run's batches)
        state = self.stages[replica][stage]
        state.finish()
        self.recorder.on_stage(batch.id, replica, stage, state.started_at, self.kernel.now)
        if self.single_stage:  # the only stage: the step queued behind (async) starts, this one ends
            queued = state.start_next(self.kernel.now)
            if queued is not None:
                self._on_start(replica, queued)
                self.kernel.at(self.kernel.now + self.stage_time(replica, queued, 0), self.on_stage_end, replica, 0,
                               queued)
            self.kernel.soon(self.on_batch_end, replica, batch)
            return
        self.kernel.soon(self.on_stage_schedule, replica, stage)
        if state.is_last:
            self.kernel.soon(self.on_batch_end, replica, batch)
        else:
            self.kernel.soon(self.on_stage_arrival, replica, stage + 1, batch)

    def unfinished(self) -> list[Request]:
        """Requests that arrived but never finished (stuck: e.g. can no longer be admitted)."""
        return [r for r in self.live.values() if r.status < RequestStatus.FINISHED]

    def retire_all(self) -> RequestLog:
        """At the end of the run: every remaining request's figures into the log."""
        for request in self.live.values():
            self.request_log.record(request)
        self.live.clear()
        return self.request_log
