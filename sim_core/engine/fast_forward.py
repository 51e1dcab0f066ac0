"""Advance runs of decode iterations in one step (pipeline parallelism 1; PP > 1: pipeline_run.py).

When a replica forms a decode-only batch that its policy promises to re-form (minus finished
requests) at every following iteration (`ReplicaScheduler.steady_decode`, schedulers/steady.py),
the iterations up to the next thing that can change a decision are known in advance:

* a member finishes at the end of iteration `total - processed - 1`; the run goes on without
  it when the policy says nothing else can join (`past_completions`: e.g. an empty queue), else
  it ends there;
* KV blocks run short: the run stops before any formation that might find no spare block
  (`paged`: a member takes a block when its tokens outgrow its blocks; `per_token`: one block
  per member per iteration), counting blocks that finished members free;
* a request is routed to the replica: the run is cut at the first iteration ending at or after
  its arrival (at equal times the arrival is seen first, as in Vidur).

A run keeps iteration 0's batch in flight and one kernel event at the end of its last
iteration. There the skipped iterations are applied in bulk: tokens, completions, block frees
and allocations in the order the stepwise path makes them (so physical block ids match), and
every record that path would make, with the same float times (stage ends are sequential sums).
Most runs are cut by an arrival long before their limit, so end times are computed for a first
chunk of iterations and extended (by twice as many) at the chunk's end only when the run gets
there uncut; the sequential sums are the same as if computed at once.
The last iteration then ends through the ordinary stage-end handler.

With async steps (vllm_v1's default, `SteadyDecode.in_flight`) the run starts from a batch queued
behind the step running, which becomes its iteration 0: formations run one iteration ahead, the
iterations are priced by the overlap clock, block events are replayed at their instants
(`run_replay.py`, also for prefix-cache keys), and the run ends with the next step queued
(docs/design/fast-forward.md).

A run ended in bulk (vllm, sarathi) hands its survivors' member arrays to the replica's next
run, which reads only its newcomers from their requests (`run_carry.py`).

Everything a run changes outside this module goes through methods of the objects it advances:
the stage (`start`, `begin_iteration`), the requests (`on_decode_run`, `on_decode_runs`), the pool (its
allocate / free calls), the policy (`SteadyDecode.resume`) and the recorder.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING, Literal, overload

import numpy as np

from sim_core.engine.radix_growth import complete, grow_merged, plan_growth
from sim_core.engine.run_carry import CARRY_MEMBERS, Carry, carried_arrays, carry_of
from sim_core.engine.run_counting import Steps, count_bulk, count_small
from sim_core.engine.run_growth import (
    NUMPY_MEMBERS,
    MemberArrays,
    growth_limit,
    growth_plan,
    numpy_growth,
    ordered_events,
    planned_allocations,
)
from sim_core.engine.run_members import advance_tokens, live_members, member_order, record_run_batches
from sim_core.engine.run_reach import RunReach
from sim_core.engine.run_replay import replay, run_events
from sim_core.entities import Batch, Request
from sim_core.memory.block_hash_cache import HashedBlockPool
from sim_core.memory.block_pool import BlockPool
from sim_core.memory.radix_pool import RadixKvPool
from sim_core.predictor.shape import BatchShape

if TYPE_CHECKING:
    from sim_core.engine.kernel import Entry
    from sim_core.engine.pipeline_run import PipelineRuns
    from sim_core.engine.routing import Queued
    from sim_core.engine.simulator import Simulator
    from sim_core.engine.stage import Stage
    from sim_core.memory.kv_pool import KvPool
    from sim_core.results.record import Recorder
    from sim_core.schedulers.steady import SteadyDecode

# finished members as (formation, member, freed block ids, how many), and the allocations as
# (formations, members, block ids, blocks taken per formation): the id pools fill the first
# three, the counting pools the last
Finished = list[tuple[int, int, list[int], int]]
Changes = tuple[Finished, tuple[list[int] | None, list[int] | None, list[int] | None, list[int] | None]]

MAX_RUN = 1 << 20  # iterations in one run (a longer run simply starts again)
FIRST_CHUNK = 16   # iterations whose end times are computed when a run starts (at least)
# a serial run's ends and context before `_plan` replaces them (never written in place)
_NO_ENDS, _NO_CONTEXT = np.empty(0), np.empty(0, dtype=np.int64)
_NO_ENDS.flags.writeable = _NO_CONTEXT.flags.writeable = False
@dataclass(slots=True, eq=False)
class DecodeRun:
    """A planned run: iteration j of the batch's live members ends at `ends[j]`."""

    first: Batch
    promise: SteadyDecode       # the policy's, for `first`
    started_at: float
    ends: np.ndarray            # end times of iterations 0..planned-1 (planned <= num_iterations)
    context: np.ndarray         # KV tokens the live members hold at the start of each iteration
    remaining: list[int]        # per member: iterations left; it finishes after iteration remaining-1
    order: np.ndarray           # `remaining` sorted
    suffix: np.ndarray | None   # KV tokens held by the members in `order` from position i on
    num_iterations: int         # iterations that will run, as far as checked (shrinks when a request arrives)
    token: int
    num_waiting: int            # queue length when the run started (arrivals cut the run)
    limit: int                  # iterations the policy and the members' completions allow
    growth_to: int              # KV growth is checked for iterations before this (num_iterations <= it <= limit)
    free: int                   # free KV blocks when the run started
    arrays: MemberArrays | None = None   # the members' figures as arrays (runs of NUMPY_MEMBERS or more)
    finish_times: list[float] | None = None   # members' last iteration ends, sorted (inf: not planned yet)

    @property
    def final(self) -> bool:
        """Whether `num_iterations` is the run's length: KV growth ended it, or is checked up to its limit."""
        return self.num_iterations < self.growth_to or self.growth_to >= self.limit

    def check_growth(self, bound: int) -> None:
        """Check KV growth for iterations before `bound` (<= limit); `num_iterations` becomes
        the run's length as far as that (the same as checking all at once: a formation's spare
        blocks do not depend on how far the check reaches)."""
        requests = self.first.requests
        self.num_iterations = growth_limit(self.promise, self.free, requests, self.remaining, bound, self.arrays)
        self.growth_to = bound
    # async steps (`promise.in_flight`): `first` was already running when the run started, and
    queued: Batch | None = None       # the batch of iteration 1, formed then, which the run holds
    absorbed: bool = False            # whether `first`'s own stage end has come (and was left to the run)
    event: Entry | None = None        # the kernel's pending end or extension event (cancelled at a cut)
    # on a replica that overlaps (None else; async steps always do):
    gpu: np.ndarray | None = None     # GPU seconds of each planned iteration (overlap pricing)
    hidden: np.ndarray | None = None  # host seconds each planned iteration hid behind the one before


def _finish_times(run: DecodeRun) -> list[float]:
    """When each member's last iteration ends (sorted, as `order`; inf beyond the planned ends)."""
    last = run.order - 1
    planned = last < len(run.ends)
    return np.where(planned, run.ends[np.minimum(last, len(run.ends) - 1)], np.inf).tolist()


class RunView:
    """A replica's endpoint as a router that counts outstanding requests sees it while the
    replica may be inside a decode run, whose completions are applied only at its end: the
    members that finished by now are taken off, which is what stepwise simulation shows."""

    __slots__ = ("endpoint", "fast", "replica")

    def __init__(self, endpoint: Queued, fast: FastForward | PipelineRuns, replica: int) -> None:
        self.endpoint, self.fast, self.replica = endpoint, fast, replica

    @property
    def num_waiting(self) -> int:
        return self.endpoint.num_waiting     # a run never changes the queue (an arrival cuts it)

    @property
    def num_outstanding(self) -> int:
        return self.endpoint.num_outstanding - self.fast.finished_members(self.replica)

    @property
    def num_kv_blocks_used(self) -> int:
        raise NotImplementedError("KV in use is not known inside a decode run: routers reading it do not "
                                  "fast-forward")

    def num_cached_blocks(self, request: Request) -> int:
        raise NotImplementedError("cached prefixes are not known inside a decode run: routers reading them "
                                  "do not fast-forward")


class FastForward:
    """Plans, cuts and completes decode runs for a Simulator."""

    def __init__(self, simulator: Simulator) -> None:
        self.sim = simulator
        self.runs: dict[int, DecodeRun] = {}
        self._tokens = 0
        self._last_length: dict[int, int] = {}   # replica -> iterations its last run ran
        self._reach: RunReach | None = None   # made at the first run (the arrivals are known then)
        self._carry: dict[int, Carry] = {}   # replica -> its last run's survivors (run_carry.py)

    def try_start(self, replica: int, batch: Batch) -> bool:
        """Start a run for a just-formed batch (on the idle stage, or, with async steps, queued
        behind the step running); False leaves it to the ordinary path."""
        scheduler = self.sim.schedulers[replica]
        # the replica's last run's survivors, carried (run_carry.py): kept across batches of
        # prompts alone, consumed or dropped by any other
        carry = self._carry.pop(replica) if replica in self._carry and not _prompts_only(batch) else None
        promise = scheduler.steady_decode(batch)
        if promise is None or promise.limit < 2:
            return False
        if promise.inbox_may_join and self.sim.handoff is not None and self.sim.handoff.has_inbox(replica):
            return False
        first = promise.in_flight or batch
        requests = first.requests
        planned = numpy_growth(promise, requests)   # the numpy growth plan reads the members' figures once
        arrays: MemberArrays | None = None
        carried = None   # a carry serves only a serial run on the numpy growth plan
        if carry is not None and promise.in_flight is None and planned:
            carried = carried_arrays(carry, promise, batch, promise.preemptions)
        if carried is not None:
            remaining, arrays = carried
        else:
            remaining = [r.num_prefill_tokens + r.num_decode_tokens - r.num_processed_tokens for r in requests]
        through = promise.past_completions and not self._completion_matters(replica, requests)
        # async steps: a member leaves the batches one formation before it finishes (its last
        # token in flight), and the step the run leaves queued needs a live member
        limit = min(promise.limit, MAX_RUN, (max(remaining) if through else min(remaining)) - promise.lead)
        if limit < 2:
            return False
        # KV growth is checked only as far as the run is planned (its first chunk), and further
        # when it is extended: most runs are cut by an arrival long before `limit`
        free, bound = scheduler.pool.num_free, min(limit, self._first_chunk(replica))
        if arrays is None and planned:   # (the run's end plans them too)
            arrays = MemberArrays.of(promise, requests, remaining)
        stop = growth_limit(promise, free, requests, remaining, bound, arrays)
        if stop < 2:
            return False
        now = self.sim.kernel.now
        predictor = self.sim.predictors[replica]
        order, suffix = member_order(first, remaining, predictor.needs_context, None if arrays is None else arrays.left)
        self._tokens += 1
        stage = self.sim.stages[replica][0]
        overlap = self.sim.overlap if self.sim.overlapping[replica] else None
        if promise.in_flight is None:
            priced = None if overlap is None else np.empty(0)   # overlap pricing fills gpu and hidden
            run = DecodeRun(batch, promise, now, _NO_ENDS, _NO_CONTEXT, remaining, order, suffix,
                            stop, self._tokens, scheduler.endpoint.num_waiting, limit, bound, free, arrays, gpu=priced,
                            hidden=priced)
            self._plan(replica, run, stop)
            stage.start(now)
            if overlap is not None and run.gpu is not None and run.hidden is not None:
                # iteration 0 is priced, and joins the clock, as iteration_time would have
                overlap.on_iteration(replica, now, float(run.ends[0]), float(run.gpu[0]), float(run.hidden[0]))
        else:
            assert overlap is not None, "async scheduling overlaps the host's work"
            end, first_gpu = overlap.last_iteration(replica)   # iteration 0 is running, priced
            run = DecodeRun(first, promise, stage.started_at, np.array([end]), np.zeros(1, dtype=np.int64), remaining,
                            order, suffix, stop, self._tokens, scheduler.endpoint.num_waiting, limit, bound, free,
                            arrays, queued=batch,
                            gpu=np.array([first_gpu]), hidden=np.zeros(1))
            self._plan(replica, run, stop)
        if overlap is not None:
            overlap.start_run(replica, now)
        self.runs[replica] = run
        self._schedule_next(replica, run)
        return True

    def _first_chunk(self, replica: int) -> int:
        """Iterations to plan when a run starts: twice as many as the replica's last run ran
        (runs on a replica tend to be cut at similar lengths, by its arrival rate), at least
        FIRST_CHUNK, and no further than about the next arrival (`run_reach.py`); a longer run
        is extended at the chunk's end. Only the work per run changes, not its end times
        (sequential sums either way)."""
        if self._reach is None:
            sim = self.sim
            self._reach = RunReach(sim.workload.arrived_at[sim.sessions.heads].tolist(), len(sim.schedulers))
        return self._reach.cap(replica, self.sim.kernel.now, max(FIRST_CHUNK, 2 * self._last_length.get(replica, 0)))

    def _plan(self, replica: int, run: DecodeRun, stop: int) -> None:
        """Price the run's iterations len(run.ends)..stop-1 as the stepwise path does: the cost
        model's decode time at the batch size the GPU runs (`SteadyDecode.padded`: CUDA-graph
        padding), less, on a replica that overlaps (`run.gpu` set), the host time each hides
        behind the one before (`OverlapClock.run_times`); end times are sequential sums from the
        run's start (async steps: from the end of iteration 0, running when the run started)."""
        planned = len(run.ends)
        iterations = np.arange(planned, stop, dtype=np.int64)
        counts, context = live_members(run.order, run.suffix, iterations, run.promise.lead)
        sizes = run.promise.padded(counts)
        durations = self.sim.predictors[replica].decode_run_times(sizes, context, 0)
        if run.gpu is not None:
            overlap = self.sim.overlap
            assert overlap is not None and run.hidden is not None, "overlap pricing keeps gpu and hidden"
            previous = float(run.gpu[-1]) if planned else overlap.gpu_before(replica, run.started_at)
            durations, hidden, gpu = overlap.run_times(replica, durations, sizes, previous)
            run.gpu, run.hidden = np.concatenate((run.gpu, gpu)), np.concatenate((run.hidden, hidden))
        durations[0] += run.ends[-1] if planned else run.started_at
        if planned:
            run.ends = np.concatenate((run.ends, durations.cumsum()))
            run.context = np.concatenate((run.context, context))
        else:   # the first chunk of a serial run
            run.ends, run.context = durations.cumsum(), context

    def _schedule_next(self, replica: int, run: DecodeRun) -> None:
        """The run's end event if all its iterations are planned, else the event extending it."""
        handler = self.on_run_end if len(run.ends) >= run.num_iterations and run.final else self.on_extend
        run.event = self.sim.kernel.at_cancellable(float(run.ends[-1]), handler, replica, run.token)

    def on_extend(self, replica: int, token: int) -> None:
        """The run got to its last planned iteration uncut: plan twice as many more."""
        run = self.runs.get(replica)
        if run is None or run.token != token:
            return  # superseded by a cut
        planned = len(run.ends)
        if not run.final:
            run.check_growth(min(run.limit, 3 * planned))
        if run.num_iterations <= planned:   # KV growth ends the run here after all (its end event, as planned)
            self.on_run_end(replica, token)
            return
        stop = min(run.num_iterations, 3 * planned)
        self._plan(replica, run, stop)
        run.finish_times = None
        self._schedule_next(replica, run)

    def _completion_matters(self, replica: int, requests: list[Request]) -> bool:
        """Whether a member's completion must be simulated at its own time: it releases a
        session's next turn, or frees blocks a hand-off waits for on this decode replica."""
        sim = self.sim
        if sim.sessions.closed_loop and any(sim.sessions.follower(r.id) >= 0 for r in requests):
            return True
        return sim.handoff is not None and sim.handoff.has_inbox(replica)

    def finished_members(self, replica: int) -> int:
        """Members of the replica's run (if any) that stepwise simulation would no longer count
        as outstanding when a router reads the replica now: at an instant, the routing its
        arrivals start runs after that instant's stage ends but before the batch ends those
        queue, which complete the requests (engine/kernel.py), so a member whose last iteration
        ends exactly now still counts then; at the end of the instant (a zero-pause turn,
        `late_phase`) every batch end of the instant has run, and it no longer does."""
        run = self.runs.get(replica)
        if run is None or not run.promise.frees_on_completion:
            return 0
        if run.finish_times is None:
            run.finish_times = _finish_times(run)
        # a member whose last iteration lies past a cut ends after the run's last end >= now
        kernel = self.sim.kernel
        return (bisect_right if kernel.late_phase else bisect_left)(run.finish_times, kernel.now)

    def holds_slot(self, replica: int) -> bool:
        """Whether a formation on the replica now would surely form nothing, because its run
        holds the only batch slot: a serial run of a policy with the base formation loop and
        batch end (`SteadyDecode.ends_in_bulk`: vllm, sarathi; no KV loads), outside P/D. Until
        the run's batch end frees the slot (the batch end then forms, seeing what arrived), the
        simulator need not queue a formation for an arrival routed there."""
        run = self.runs.get(replica)
        return run is not None and run.queued is None and run.promise.ends_in_bulk and self.sim.handoff is None

    def absorbs(self, replica: int, batch: Batch) -> bool:
        """Whether a stage end of `batch` belongs to an async run: the step that was running
        when the run started ends inside the run, which goes on from it (the simulator's
        stage-end handler then does nothing)."""
        run = self.runs.get(replica)
        if run is None or run.queued is None or run.first is not batch or run.absorbed:
            return False
        run.absorbed = True
        return True

    def on_request_routed(self, replica: int) -> None:
        """A request joined the replica's queues: end the run at the first iteration ending at or
        after now, so the next formation sees the request. At the end of an instant (kernel
        `late_phase`) a formation at now has already happened stepwise: the first iteration
        ending after now."""
        run = self.runs.get(replica)
        if run is None:
            return
        kernel = self.sim.kernel
        now = kernel.now
        side: Literal["left", "right"] = "right" if kernel.late_phase else "left"
        # now <= the last planned end (an extension event at that end runs before later
        # arrivals and before the instant's late phase), so the planned ends suffice
        last = int(run.ends[: run.num_iterations].searchsorted(now, side=side))
        if last + 1 >= run.num_iterations:
            if run.final:
                return
            # the arrival falls in the last planned iteration: cut there unless KV growth ends
            # the run there anyway (then its pending event ends it, as it would have)
            run.check_growth(min(run.limit, run.num_iterations + 1))
            if last + 1 >= run.num_iterations:
                return
        # the run's pending event would find the run superseded (its token) and do nothing
        if run.event is not None:
            kernel.cancel(run.event)
            run.event = None
        if last == 0 and run.queued is not None and not run.absorbed:
            # async: the new request is seen when the running step ends, as without a run
            del self.runs[replica]
            self._close(replica, run, 1)
            self.sim.stages[replica][0].add(run.queued)
            return
        run.num_iterations = run.limit = run.growth_to = last + 1
        self._tokens += 1
        run.token = self._tokens
        end = float(run.ends[last])
        if end == now:
            kernel.soon(self.on_run_end, replica, run.token)
        else:
            run.event = kernel.at_cancellable(end, self.on_run_end, replica, run.token)

    def on_run_end(self, replica: int, token: int) -> None:
        run = self.runs.get(replica)
        if run is None or run.token != token:
            return  # superseded by a cut
        del self.runs[replica]
        self._last_length[replica] = run.num_iterations
        if self._reach is not None:
            self._reach.note_run(replica, run.started_at, float(run.ends[run.num_iterations - 1]), run.num_iterations)
        stage = self.sim.stages[replica][0]
        if run.num_iterations > 1 and self._ends_in_bulk(replica, run):
            self._end_in_bulk(replica, run, stage)
            return
        if run.num_iterations > 1:
            last, queued = self._apply(replica, run)
            stage.begin_iteration(float(run.ends[run.num_iterations - 2]))
        else:
            last, queued = run.first, run.queued
        self._close(replica, run, run.num_iterations)
        if queued is not None:
            stage.add(queued)   # async: the step formed as the last one began
        self.sim.on_stage_end(replica, 0, last)

    def _ends_in_bulk(self, replica: int, run: DecodeRun) -> bool:
        """Whether the run's last iteration ends in bulk too (`SteadyDecode.ends_in_bulk`): a
        serial run, priced without overlap, on a replica no P/D prefill hook watches."""
        handoff = self.sim.handoff
        return (run.promise.ends_in_bulk and run.queued is None and run.gpu is None
                and (handoff is None or not handoff.is_prefill(replica)))

    def _end_in_bulk(self, replica: int, run: DecodeRun, stage: Stage) -> None:
        """End a run of k iterations with all of them applied in one step: what `_apply`, the
        policy's last batch and `Simulator.on_stage_end` / `on_batch_end` of that batch would
        do, without forming it. Its members' tokens (and completions) are applied now, its stage
        row is recorded now, and its batch end (token gaps, completions, the policy's bookkeeping,
        the replica's state, the next formation) is queued where `on_stage_end` queues
        `on_batch_end`: nothing at this instant between the two reads the members' tokens (the
        routers read queues and block holders, which change only at the batch end)."""
        k, ends, sim = run.num_iterations, run.ends, self.sim
        live = self._apply(replica, run, through=True)
        if run.arrays is not None and len(run.remaining) >= CARRY_MEMBERS and sim.handoff is None:
            carry = carry_of(run.first.requests, run.arrays, k, int(run.order[0]) > k, run.promise.preemptions)
            if carry is not None:
                self._carry[replica] = carry
        last_id = run.promise.skip_batches(k)
        start, now = float(ends[k - 2]), float(ends[k - 1])
        stage.begin_iteration(start)
        stage.finish()
        sim.recorder.on_stage(last_id, replica, 0, start, now)
        # each live member's gap to its last token: the same for all (their previous token came
        # at the end of iteration k-2)
        # (nobody finishes in the last iteration unless a member has exactly k iterations left)
        sim.kernel.soon(self._end_batch, replica, run.promise, live, now - start, int(run.order[0]) <= k)

    def _end_batch(self, replica: int, promise: SteadyDecode, live: list[Request], gap: float,
                   completions: bool) -> None:
        """`Simulator.on_batch_end` of a run's last iteration ended in bulk (`_end_in_bulk`);
        `completions` False: none of `live` finished in it."""
        sim = self.sim
        sim.recorder.on_token_gaps(gap, len(live))
        if completions:
            for request in live:
                if request.completed:
                    sim.on_request_done(replica, request)
        promise.end_batch(live)
        sim.record_replica(promise.scheduler)
        sim.kernel.soon(sim.on_replica_schedule, replica)

    def _close(self, replica: int, run: DecodeRun, k: int) -> None:
        """A run ends after k iterations: on a replica that overlaps, the clock learns what
        iterations 1..k-1 hid and how the last one ended (iteration 0 joined it when it began:
        `iteration_time`, or for a serial run `on_iteration`)."""
        if run.gpu is None:
            return
        overlap = self.sim.overlap
        assert overlap is not None and run.hidden is not None, "overlap pricing keeps gpu and hidden"
        overlap.after_run(replica, float(run.ends[k - 1]), float(run.gpu[k - 1]), run.ends[: k - 1], run.hidden[1:k])

    @overload
    def _apply(self, replica: int, run: DecodeRun) -> tuple[Batch, Batch | None]: ...

    @overload
    def _apply(self, replica: int, run: DecodeRun, through: Literal[True]) -> list[Request]: ...

    def _apply(self, replica: int, run: DecodeRun, through: bool = False) -> tuple[Batch, Batch | None] | list[Request]:
        """Apply iterations 0..k-2 in bulk; return the batch of the last iteration, k-1, and
        (async steps) the one queued behind it. `through`: the last iteration's tokens too
        (`_end_in_bulk`); return its members instead."""
        sim, k, first, promise = self.sim, run.num_iterations, run.first, run.promise
        pool = sim.schedulers[replica].pool
        members, remaining, ends = first.requests, run.remaining, run.ends[:k]
        # the members live in the last iteration: all of them unless one finishes before it (the
        # batch's own list only for `through`, whose caller does not keep it)
        if int(run.order[0]) >= k:
            live_last = members if through else list(members)
        else:
            live_last = [m for m, left in zip(members, remaining) if left >= k]
        used_before = pool.num_used
        promise.step_ended(first)   # formed before the run, they end inside it
        if run.queued is not None and k > 2:
            promise.step_ended(run.queued)
        if pool.tracks_ids and (promise.lead or promise.keys_blocks):
            processed = [r.num_processed_tokens for r in members]
            allocations = planned_allocations(promise, members, remaining, k + promise.lead)
            events = run_events(promise, members, remaining, k, allocations)
            between = advance_tokens(members, remaining, ends, sim.recorder, run.order, through)
            steps = replay(promise, pool, members, processed, events, ends, replica, sim.recorder)
        elif isinstance(pool, RadixKvPool) and not sim.recorder.keeps_blocks:
            growth = plan_growth(promise, members, remaining, k, run.arrays)
            between = advance_tokens(members, remaining, ends, sim.recorder, run.order, through)
            steps = self._record_blocks(replica, run, grow_merged(pool, promise, members, growth, k))
        elif pool.tracks_ids:
            ordered = ordered_events(promise, members, remaining, k, run.arrays)
            between = advance_tokens(members, remaining, ends, sim.recorder, run.order, through)
            if isinstance(pool, RadixKvPool):
                changes = _grow_evicting(pool, sim.recorder, promise, members, ordered, run.ends)
            else:
                changes = self._replay(pool, promise.frees_on_completion, members, ordered)
            steps = self._record_blocks(replica, run, changes)
        elif len(members) >= NUMPY_MEMBERS:   # a counting pool (no block records) from here on
            arrays = run.arrays or MemberArrays.of(promise, members, remaining)
            plan = growth_plan(promise, members, remaining, k + promise.lead, arrays)
            between = advance_tokens(members, remaining, ends, sim.recorder, run.order, through)
            steps = count_bulk(pool, promise, members, arrays, plan, k)
        else:
            steps = count_small(pool, promise, members, remaining, k)   # before the tokens advance
            between = advance_tokens(members, remaining, ends, sim.recorder, run.order, through)
        if through:
            self._record(replica, run, steps, used_before, between)
            return live_last
        last, queued = promise.resume(first, live_last, k)
        if queued is None:
            last.shape = sim.batch_shape(last)
            last.formed_at = float(ends[k - 2])
        else:
            if k > 2:   # formed as iteration k-2 began (k = 2: the batch the run started with)
                last.shape = _decode_shape(len(live_last), int(run.context[k - 1]),
                                           sim.predictors[replica].needs_context)
                last.formed_at = float(ends[k - 3])
            queued.shape = sim.batch_shape(queued)
            queued.formed_at = float(ends[k - 2])
        self._record(replica, run, steps, used_before, between)
        return last, queued

    @staticmethod
    def _replay(pool: KvPool, frees: bool, members: list[Request], events: list[tuple[int, int, int]]) -> Changes:
        """Apply block frees (`frees`: finished members free theirs) and allocations in stepwise
        order. Returns the finished members as (formation, member, freed block ids, how many)
        and the allocations as (formations, members, block ids)."""
        finished: Finished = []
        formations: list[int] = []
        takers: list[int] = []
        blocks: list[int] = []
        pending: list[Request] = []
        for formation, kind, member in events:
            if kind == 1:
                formations.append(formation)
                takers.append(member)
                pending.append(members[member])
                continue
            if pending:
                blocks += _allocate_each(pool, pending)
                pending = []
            released = pool.free(members[member]) if frees else []
            finished.append((formation, member, released, len(released)))
        if pending:
            blocks += _allocate_each(pool, pending)
        return finished, (formations, takers, blocks, None)

    def _record_blocks(self, replica: int, run: DecodeRun, changes: Changes) -> Steps:
        """The block records of bulk-applied changes (full level); returns per slot the blocks
        taken, the blocks freed and the holders that let go of theirs."""
        recorder, k, members = self.sim.recorder, run.num_iterations, run.first.requests
        finished, (formations, takers, blocks, per_formation) = changes
        freed, done = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)
        for formation, member, released, count in finished:
            if recorder.keeps_blocks:
                recorder.on_finished_at(float(run.ends[formation - 1]), replica, members[member].id, released)
            freed[formation] += count
            done[formation] += 1 if run.promise.frees_on_completion else 0   # a holder less
        if recorder.keeps_blocks and blocks:
            assert formations is not None and takers is not None, "id pools list their allocations"
            recorder.on_run_allocations(replica, run.ends[np.asarray(formations) - 1], [members[m].id for m in takers],
                                        blocks)
        if per_formation is not None:
            taken = np.asarray(per_formation, dtype=np.int64)
        else:
            taken = np.bincount(formations, minlength=k) if formations else np.zeros(k, np.int64)
        return taken, freed, done

    def _record(self, replica: int, run: DecodeRun, steps: Steps, used_before: int, between: np.ndarray) -> None:
        """The records the stepwise path makes for iterations 0..k-2 and their formations but
        the blocks' (`steps`: per slot, blocks taken and freed and holders done; `between`: the
        seconds between iterations 0..k-2, `advance_tokens`')."""
        recorder, k, first = self.sim.recorder, run.num_iterations, run.first
        ends = run.ends[: k - 1]
        holders = None   # the time series' running column, only when it is kept
        if recorder.keeps_batches:
            starts = np.empty(k - 1)
            starts[0], starts[1:] = run.started_at, ends[:-1]
            recorder.on_run_stages(replica, np.arange(first.id, first.id + k - 1), starts, ends)
            self._record_batches(replica, run)
            done = steps[2][1:k]
            holders = (self.sim.schedulers[replica].pool.num_holders + int(done.sum()) - done.cumsum()).repeat(2)
        # a member frees its blocks at the formation after its last iteration, slot `left` or
        # (async steps: run_events) too: with every `left` >= k, slots 1..k-1 free nothing (most cuts)
        rising = int(run.order[0]) >= k
        taken = steps[0][1:k]
        # after each formation's allocations
        after = used_before + (taken.cumsum() if rising else (taken - steps[1][1:k]).cumsum())
        if holders is None and not run.promise.sequential_sums:
            recorder.on_run_states(replica, ends, after, rising, between)
            return
        used = np.empty(2 * (k - 1), dtype=np.int64)
        used[0::2], used[1::2] = after - taken, after          # after the batch end, after formation
        recorder.on_replica_states(replica, ends.repeat(2), used, run.num_waiting, holders,
                                   sequential=run.promise.sequential_sums)

    def _record_batches(self, replica: int, run: DecodeRun) -> None:
        """Batch rows of formations 1+lead..k-1+lead (formation f is formed as iteration f-1-lead ends)."""
        k, lead = run.num_iterations, run.promise.lead
        formations = np.arange(1 + lead, k + lead, dtype=np.int64)
        record_run_batches(self.sim.recorder, replica, run.first, run.remaining, run.order, run.suffix, lead, 1 + lead,
                           run.first.id + formations, run.ends[: k - 1], self.sim.predictors[replica].needs_context,
                           run.promise.padded_size)


def _prompts_only(batch: Batch) -> bool:
    """Whether every token the batch runs is a prompt's (no member decodes in it)."""
    return batch.num_prefill_tokens > 0 and batch.num_prefill_tokens == sum(batch.num_tokens)


def _decode_shape(num_requests: int, context: int, with_context: bool) -> BatchShape:
    """The shape of a decode batch, as Simulator.batch_shape makes it."""
    if with_context:
        return BatchShape(num_requests, num_requests, (), num_requests, context)
    return BatchShape(num_requests, num_requests)


def _grow_evicting(pool: RadixKvPool, recorder: Recorder, promise: SteadyDecode, members: list[Request],
                   events: list[tuple[int, int, int]], ends: np.ndarray) -> Changes:
    """`_replay` for the radix pool (sglang) with block records (without: `radix_growth.py`): at
    each formation, the members that finished are booked by the policy (`on_completion`: their
    tokens join the tree, their blocks are let go), then the formation's blocks are taken as
    stepwise, evicting tree leaves first when the free list is short. The pool records its own
    block events, so the recorder's clock is set to each formation's instant meanwhile (hence
    no block ids for the bulk records); a finished member's count is how many blocks it made
    spare (free or evictable)."""
    growth = [(formation, member) for formation, kind, member in events if kind == 1]
    blocks: list[int] = []   # the pool recorded them
    changes = ([formation for formation, _ in growth], [member for _, member in growth], blocks, None)
    finished: Finished = []
    now, late = recorder.now, recorder.late
    recorder.late = False   # the formations' instants are past: their records are of the ordinary phase
    for formation, group in groupby(events, key=lambda event: event[0]):
        recorder.now = float(ends[formation - 1])
        takers = []
        for _, kind, member in group:
            if kind == 1:
                takers.append(members[member])
            else:
                finished.append(complete(pool, promise, members, formation, member))
        if takers:
            pool.allocate_each(takers)
    recorder.now, recorder.late = now, late
    return finished, changes


def _allocate_each(pool: KvPool, requests: list[Request]) -> list[int]:
    """One new block to each request (the pools of the policies that grow by pages)."""
    assert isinstance(pool, (BlockPool, HashedBlockPool)), "paged growth allocates from an id pool"
    return pool.allocate_each(requests)
