"""`run_simulation(config) -> SimulationResult`: the one entry point of the core."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim_core.cluster.handoff import Disaggregation
from sim_core.cluster.pools import PoolView, pool_views
from sim_core.cluster.sessions import build_chains, session_notes
from sim_core.config import SimulationConfig
from sim_core.config.policies import policy_names, policy_traits
from sim_core.engine.budget import CostEstimate, Limits, check_budget
from sim_core.engine.collector import collector_paused
from sim_core.engine.dp_group import DpLockstep, graph_limit
from sim_core.engine.routing import ROUTERS
from sim_core.engine.run_watch import MemoryWatch, StopCheck
from sim_core.engine.simulator import Simulator
from sim_core.entities import Request
from sim_core.errors import ConfigError
from sim_core.memory import MemoryPlan, plan_memory
from sim_core.memory.cpu_tier import OffloadSize, offload_size
from sim_core.memory.model_bytes import kv_bytes_per_token
from sim_core.memory.swap_space import num_swap_blocks
from sim_core.predictor import Predictor, build_predictor
from sim_core.predictor.kv_copy import KvCopyCost
from sim_core.results.record import REJECTED, Recorder
from sim_core.results.replicas import ReplicaInfo
from sim_core.results.result import SimulationResult, build_result
from sim_core.schedulers import SCHEDULERS, ReplicaLimits, ReplicaScheduler
from sim_core.workload import Workload, build_workload

CLI_LIMITS = Limits.cli()


def run_simulation(config: SimulationConfig, workload: Workload | None = None,
                   after_event: Callable[[Simulator], None] | None = None,
                   progress: Callable[[float], None] | None = None, *, limits: Limits | None = CLI_LIMITS,
                   should_stop: Callable[[], bool] | None = None, deadline_s: float | None = None,
                   gap_window: tuple[float, float] | None = None) -> SimulationResult:
    """Simulate the scenario from scratch (fresh ids, counters and RNG; no global state).

    Args:
        config: the validated scenario.
        workload: the requests, if already built (else read or generated from `config`).
        after_event: called with the Simulator after every event (tests check invariants).
        progress: called now and then with the simulated time reached (for progress bars).
        limits: the budget, checked before the workload is generated or read and again, on
            exact figures, before anything else is built (default: the CLI's generous one;
            None: no limits). Its `max_wall_s` is the default of `deadline_s`.
        should_stop: polled now and then (every few thousand simulated instants and between
            phases); returning True stops the run.
        deadline_s: wall-clock seconds the run may take from this call.
        gap_window: count only the token gaps ending in [start, end] s in the TBT figures (a
            capacity probe's steady-state window); None: all of them.

    Raises:
        ConfigError, TraceError: bad scenario or trace (one-line message).
        BudgetError: the run would cost more than `limits` allow (nothing was built), or its
            records passed the memory limit while it ran (stopped there, nothing returned).
        RunCancelled, RunTimeLimit: `should_stop` said so, or `deadline_s` passed.
        SimulationError: the policy hit a state it cannot handle (e.g. LightLLM out of KV).
    """
    with collector_paused():   # its walks over everything the caller holds cost a big run seconds
        return _run(config, workload, after_event, progress, _stop_check(limits, should_stop, deadline_s), limits,
                    gap_window)


def _run(config: SimulationConfig, workload: Workload | None, after_event: Callable[[Simulator], None] | None,
         progress: Callable[[float], None] | None, stop: StopCheck, limits: Limits | None,
         gap_window: tuple[float, float] | None) -> SimulationResult:
    """`run_simulation`'s body, with the collector paused."""
    workload, estimate = _budgeted_workload(config, workload, limits)
    stop()
    views = pool_views(config)
    sized = [(view, *replica_limits(view.config)) for view in views]   # (view, plan, limits) per pool
    recorder = Recorder(config.engine.record, sum(v.num_replicas for v in views), gap_window)
    if limits is not None and limits.max_peak_bytes is not None and estimate is not None:
        stop.memory = MemoryWatch(config, estimate, limits, recorder.held_rows)
    schedulers, predictors = _replicas(config, sized, recorder, workload)
    rejected = _rejections(views, schedulers, workload)
    stop()
    simulator = _simulator(config, views, schedulers, predictors, workload, recorder)
    chains = build_chains(workload, [i for i in range(len(workload)) if i not in rejected], config.workload.sessions,
                          config.seed if config.workload.seed is None else config.workload.seed)
    simulator.run(chains, after_event, progress, stop if stop.active else None)
    stop()
    for request in simulator.unfinished():
        rejected[request.id] = _stuck_reason(request, schedulers[request.replica_id])
        recorder.on_state(request.replica_id, request.id, REJECTED)
    for rid in chains.never_arrived():
        rejected[rid] = "never arrived: the previous turn of its session never finished"
    notes = list(workload.notes) + ([f"{len(rejected)} request(s) rejected: see reject_reason"] if rejected else [])
    notes += session_notes(config, workload)
    notes += _policy_notes(schedulers, workload, rejected)
    return build_result(config, workload, _descriptions(sized), recorder, simulator.retire_all(), rejected, notes,
                        num_batches=sum(scheduler.num_batches for scheduler in schedulers), predictors=predictors,
                        overlap_hidden_s=simulator.overlap.hidden_s if simulator.overlap is not None else 0.0,
                        transfers=simulator.handoff.table() if simulator.handoff is not None else None)


def _simulator(config: SimulationConfig, views: list[PoolView], schedulers: list[ReplicaScheduler],
               predictors: list[Predictor], workload: Workload, recorder: Recorder) -> Simulator:
    """The simulator of the run: a router per pool (arrivals enter the first), DP ranks of a MoE
    replica stepping together, and the P/D hand-off when there are two pools."""
    rng = np.random.default_rng(config.seed)
    routers = [ROUTERS[v.config.cluster.global_scheduler](v.num_replicas, rng) for v in views]
    lockstep = config.cluster.data_parallel_size > 1 and config.cluster.pipeline_parallel_size == 1
    simulator = Simulator(schedulers, routers[0], predictors, workload, recorder,
                          fast_forward=config.engine.fast_forward and not _reads_load(routers, views) and not lockstep,
                          num_entry=views[0].num_replicas,
                          kv_copy_cost=KvCopyCost.from_config(config))
    if lockstep:   # MoE attention DP: the ranks of a replica step together (stepwise: no fast-forward)
        simulator.dp = DpLockstep(simulator, config.cluster.data_parallel_size, _graph_tokens(config))
    if len(views) > 1:
        simulator.handoff = Disaggregation(simulator, views[0].num_replicas, routers[1], config.disaggregation,
                                           int(kv_bytes_per_token(config.model_spec(), config.kv_cache_dtype())))
    return simulator


def _graph_tokens(config: SimulationConfig) -> int:
    """The largest step a DP rank runs as a CUDA graph (DP padding applies up to it): vLLM's
    default capture size for the most requests an iteration of the scheduler holds."""
    return graph_limit(config.scheduler.max_batch_requests())


def _reads_load(routers: list, views: list[PoolView]) -> bool:
    """Whether a router reads load a decode run cannot report at every instant (see
    engine/routing.py): then decode runs are simulated iteration by iteration. A pool of one
    replica never compares loads."""
    return any(view.num_replicas > 1 and (router.reads == "state" or (router.reads == "outstanding" and k > 0))
               for k, (router, view) in enumerate(zip(routers, views)))


def _budgeted_workload(config: SimulationConfig, workload: Workload | None,
                       limits: Limits | None) -> tuple[Workload, CostEstimate | None]:
    """The run's workload, built only once the scenario fits `limits`, and its estimate on the
    exact figures (None: no limits)."""
    if workload is None:
        if limits is not None:
            check_budget(config, limits)   # from the scenario alone: before generating or reading
        workload = build_workload(config)
    return workload, None if limits is None else check_budget(config, limits, workload)


def _replicas(config: SimulationConfig, sized: list, recorder: Recorder,
              workload: Workload) -> tuple[list[ReplicaScheduler], list[Predictor]]:
    """One scheduler per replica of every pool, in replica-id order, joined to its pool and the
    workload, and the predictor of its pool."""
    schedulers: list[ReplicaScheduler] = []
    predictors: list[Predictor] = []
    for view, _, pool_limits in sized:
        predictor = build_predictor(view.config)
        for r in view.replica_ids:
            scheduler = SCHEDULERS[config.scheduler.type](r, view.config.cluster.pipeline_parallel_size,
                                                          view.config.scheduler, pool_limits, recorder)
            scheduler.endpoint.join(view.name, workload)
            schedulers.append(scheduler)
            predictors.append(predictor)
    return schedulers, predictors


def _descriptions(sized: list) -> list[ReplicaInfo]:
    """Each replica of every pool, in replica-id order, as the result describes it."""
    return [ReplicaInfo(r, view.name, view.config.cluster.tensor_parallel_size,
                        view.config.cluster.pipeline_parallel_size, pool_limits.num_blocks,
                        view.config.scheduler.block_size, pool_limits.num_swap_blocks, plan,
                        pool_limits.offload.num_blocks if pool_limits.offload else 0)
            for view, plan, pool_limits in sized for r in view.replica_ids]


def _stop_check(limits: Limits | None, should_stop: Callable[[], bool] | None,
                deadline_s: float | None) -> StopCheck:
    if deadline_s is None and limits is not None and limits.max_wall_s is not None:
        return StopCheck(should_stop, limits.max_wall_s, limits.raise_hint("max_wall_s"))
    return StopCheck(should_stop, deadline_s)


def replica_limits(config: SimulationConfig) -> tuple[MemoryPlan | None, ReplicaLimits]:
    """The memory plan (None where the scenario sets its blocks and the planner cannot run) and
    the limits each replica of `config` runs under (KV blocks, batch size, tokens per iteration).

    Raises:
        ConfigError: the planner refuses a scenario whose policy needs it.
    """
    sched = config.scheduler
    reserves = sched.traits.reserves_max_model_len   # its batch limit is the planner's max batch size
    needs_planner = sched.num_blocks is None or reserves
    try:
        plan = plan_memory(config)
    except ConfigError:
        if needs_planner:
            raise
        plan = None
    if sched.num_blocks is not None:
        num_blocks = sched.num_blocks
    else:
        assert plan is not None, "a failed plan re-raised above"
        num_blocks = plan.num_blocks
    max_batch = min(plan.max_batch_size, sched.batch_size_cap) if plan else sched.batch_size_cap
    reserve = config.max_model_len // sched.block_size
    if reserves and num_blocks < reserve:
        raise ConfigError(f"scheduler.num_blocks: {sched.type} reserves {reserve} blocks per request "
                          f"but the replica has {num_blocks}")
    swap_blocks = num_swap_blocks(config)
    return plan, ReplicaLimits(num_blocks, max_batch, reserve, config.max_model_len, swap_blocks, _offload(config))


def _offload(config: SimulationConfig) -> OffloadSize | None:
    """The CPU tier of KV offloading per replica (None when the policy offloads nothing)."""
    gib = config.scheduler.kv_offload_gib()
    if not gib:
        return None
    size = offload_size(config, gib)
    if size.num_blocks < 1:
        raise ConfigError(f"scheduler.kv_offloading_size: {gib} GiB holds no KV block ({size.block_bytes} bytes "
                          "on each GPU of the replica); give more")
    return size


def _rejections(views: list[PoolView], schedulers: list[ReplicaScheduler], workload: Workload) -> dict[int, str]:
    """Requests no replica of some pool could ever serve (a prefill replica only holds the prompt)."""
    checks = [(f"{v.name} pool: " if len(views) > 1 else "", schedulers[v.first_replica].endpoint) for v in views]
    reasons = {}
    for rid, (prefill, decode) in enumerate(zip(workload.num_prefill_tokens.tolist(),
                                                workload.num_decode_tokens.tolist())):
        for label, endpoint in checks:
            reason = endpoint.rejection_reason(prefill, decode)
            if reason:
                reasons[rid] = f"can never be served: {label}{reason}"
                break
    return reasons


def _policy_notes(schedulers: list[ReplicaScheduler], workload: Workload, rejected: dict[int, str]) -> list[str]:
    """Requests the policy ignored (their reasons join the reject reasons), and an `n` column the
    policy does not read."""
    ignored = {rid: reason for s in schedulers for rid, reason in s.endpoint.ignored.items()}
    rejected.update(ignored)
    notes = [f"{len(ignored)} request(s) ignored by {schedulers[0].config.type}: see reject_reason"] if ignored else []
    if workload.n is not None and (workload.n > 1).any() and not schedulers[0].traits.serves_parallel_samples:
        readers = [name for name in policy_names() if policy_traits(name).serves_parallel_samples]
        notes.append(f"the workload's n column (parallel samples) is read only by {', '.join(readers)}; "
                     f"{schedulers[0].config.type} serves one sequence per request")
    return notes


def _stuck_reason(request: Request, scheduler: ReplicaScheduler) -> str:
    where = scheduler.endpoint.stuck_location(request)
    return (f"never finished: still {where} of replica {request.replica_id} when nothing else could "
            f"run (prompt now {request.num_prefill_tokens} tokens after {request.num_restarts} restart(s))")
