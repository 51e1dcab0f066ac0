"""`vllm_v1` (vLLM V1 engine, rule for rule as vLLM 0.33.0): one token budget, running first.

Each iteration (vLLM's `Scheduler.schedule`), with budget = max_num_batched_tokens:

1. Running requests, in admission order, while budget is left: each gets n = the tokens it
   lags behind (a decode: 1), cut to long_prefill_token_threshold (when > 0 and more than one
   request is running or waiting: alone, a prompt starves nobody) and to the budget. It needs
   KV slots for its computed tokens plus n; when the free blocks do not cover them, the tail of
   running (priority policy: the largest (priority, arrival), the first in running order among
   equals) is preempted (recompute: blocks freed, outputs folded into the prompt, back to the
   head of the waiting queue) until they do, or until the request itself is the victim: under
   FCFS that ends this phase; under priority the phase goes on with the next running request
   (which outranks it).
2. Only if nothing was preempted: waiting requests in FCFS (priority: (priority, arrival))
   order, while budget is left and fewer than max_num_seqs are running (0 = unbounded): with
   prefix caching its cached full blocks (at most prompt - 1 tokens: at least one token is
   always computed) are taken as computed, the rest is clamped as in 1; if blocks for its whole
   prompt (less the cached ones) do not fit beside the free ones (scheduler_reserve_full_isl,
   on by default) it stays, and so does everyone behind it (head-of-line blocking).
With prioritize_prefill the order is: running prompt chunks, admissions, then running decodes
with what is left (a preemption in the last phase may take back a request admitted this step).
With pipeline parallelism, requests in a batch in flight are neither scheduled nor preempted; a
request that would have to preempt itself while others are in flight waits for them instead.

Async scheduling (vLLM's default; one pipeline stage): step N+1 is scheduled while step N runs,
before N's outputs are processed (`in_flight.py`): "computed" above counts N's tokens, a step in
flight that samples leaves a placeholder token to compute, a request whose last token is in
flight is left out, and a preempted request still gets its in-flight step's token.

With kv_offloading_size > 0 (vLLM's OffloadingConnector, `schedulers/v1_offload.py`): an admission
whose GPU hit is followed by blocks held in the CPU tier takes GPU blocks for both and waits for
their load (no token budget) while the queue goes on; once loaded it is admitted before any
waiting request. Each step offers the prompt blocks it computes to the CPU tier.

Blocks (vLLM's KVCacheManager): ceil((computed + n) / block_size) per request, no watermark.
With prefix caching, full blocks get chained keys as soon as they are scheduled (async: once the
outputs that fill them arrive) and stay cached after they are freed (`memory/block_hash_cache.py`).
`tests/test_vllm_reference.py` replays vLLM 0.33.0's own scheduler step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import ceil
from operator import attrgetter
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from sim_core.config import PolicyTraits
from sim_core.config.scheduler import MaxNumBatchedTokens, MaxNumSeqs
from sim_core.entities import Batch, Request, RequestStatus
from sim_core.memory.block_hash_cache import HashedBlockPool
from sim_core.schedulers.base import UNBOUNDED
from sim_core.schedulers.engine import EngineScheduler, PrefixCachingConfig
from sim_core.schedulers.in_flight import InFlight
from sim_core.schedulers.steady import SteadyDecode
from sim_core.schedulers.v1_offload import OffloadConnector
from sim_core.schedulers.v1_step import V1Step
from sim_core.schedulers.waiting import PriorityQueue

if TYPE_CHECKING:
    from sim_core.config.simulation import SimulationConfig
    from sim_core.memory.kv_pool import KvPool
    from sim_core.results.record import Recorder
    from sim_core.schedulers.base import ReplicaLimits
    from sim_core.schedulers.vllm_v1_endpoint import V1Endpoint

V1_BATCHED_TOKENS = 2048  # max_num_batched_tokens when the scenario leaves it empty (vLLM V1's default)
# Fitted together on the public vLLM 0.15 H100 runs, held-out check in docs/accuracy.md:
API_SERVER_S = 0.0066     # api_server_s
HOST_SCALE = 0.44         # host_scale: vLLM >= 0.14's host loop against the predictor's generic phases
# Host seconds to launch one layer of a step too large for a CUDA graph (predictor/eager.py), from
# the public vLLM 0.19 Qwen3-30B-A3B run's mixed steps, checked on the vLLM 0.15 Llama-4-Scout runs
# (docs/accuracy.md, *Steps too large for a CUDA graph*):
EAGER_LAYER_S = 0.0       # eager_layer_s: a dense layer (not measurable on the development set)
EAGER_MOE_LAYER_S = 0.0016  # eager_moe_layer_s: a MoE layer
# GPU seconds a layer of such a step takes beyond its kernels, from the first-send TTFT tails of
# the public vLLM 0.15 H100 runs (docs/accuracy.md, *The gaps of a step too large for a CUDA graph*):
EAGER_GAP_LAYER_S = 0.00005  # eager_gap_layer_s
GRAPH_TOKENS_CAP = 512    # vLLM's default max_cudagraph_capture_size: min(2 x max_num_seqs, 512, budget)
_PREFILL_COMPLETE = attrgetter("is_prefill_complete")


class VllmV1Config(PrefixCachingConfig):
    """The knobs vllm_v1 reads."""

    type: Literal["vllm_v1"] = Field("vllm_v1", description=(
        "vLLM V1 engine: one token budget for decodes and prompt chunks, prefix caching"))
    max_num_seqs: MaxNumSeqs
    max_num_batched_tokens: MaxNumBatchedTokens
    long_prefill_token_threshold: int = Field(0, ge=0, le=10_000_000, description=(
        "vllm_v1: most prompt tokens one request may run in one iteration (longer prompts are "
        "chunked; 0 = only the token budget limits them)."))
    prioritize_prefill: bool = Field(False, description=(
        "vllm_v1: hand the budget to prompt work first (running chunks, then new requests) and "
        "let decodes fill what is left; lower TTFT, higher TBT."))
    scheduling_policy: Literal["fcfs", "priority"] = Field("fcfs", description=(
        "vllm_v1: fcfs (arrival order) or priority (the workload's priority column, smaller "
        "first, ties by arrival): the admission order and, in reverse, the preemption victim."))
    async_scheduling: bool = Field(True, description=(
        "vllm_v1: vLLM's async scheduling (its default since v0.14): step N+1 is scheduled while "
        "step N runs, before N's outputs are processed, and the host's work hides behind the "
        "GPU's; off: schedule, run, process outputs, one after the other (one pipeline stage only)."))

    kv_offloading_size: float = Field(0.0, ge=0.0, le=1_000_000.0, description=(
        "vllm_v1: GiB of CPU memory per replica for KV offloading (vLLM's --kv-offloading-size, "
        "native backend): prompt blocks are copied there as they are computed and a prefix hit "
        "there is loaded back over the host link (PCIe) instead of computed; 0 = off. Needs "
        "prefix caching."))

    api_server_s: float = Field(API_SERVER_S, ge=0.0, le=10.0, description=(
        "vllm_v1: seconds vLLM's OpenAI API server adds to each request as its client sees it "
        "(receiving and tokenizing the prompt and handing it to the engine; taking the engine's "
        "outputs, detokenizing and streaming them back): added to TTFT and E2E, not to the gaps "
        "between tokens. Default fitted on public vLLM 0.15 runs (docs/accuracy.md)."))
    host_scale: float = Field(HOST_SCALE, gt=0.0, le=10.0, description=(
        "vllm_v1: factor on the predictor's host phases (cpu_<phase>_s and their per-request "
        "parts) for vLLM's engine loop; with async scheduling only sampling stays on each step's "
        "path (0.44 ms + 2.2 us per request at the defaults), the rest shows after an idle gap. "
        "Default fitted on public vLLM 0.15 runs (docs/accuracy.md); 1 = the generic phases."))

    eager_layer_s: float = Field(EAGER_LAYER_S, ge=0.0, le=1.0, description=(
        "vllm_v1: host seconds to launch one dense layer of a step too large for vLLM's CUDA "
        "graphs (more tokens than min(2 x max_num_seqs, 512, max_num_batched_tokens)): such a "
        "step takes at least the stage's layers times this on the GPU side; 0 = no floor."))
    eager_moe_layer_s: float = Field(EAGER_MOE_LAYER_S, ge=0.0, le=1.0, description=(
        "vllm_v1: as eager_layer_s for a layer whose MLP is the experts (router, top-k, the "
        "fused expert kernels and their dispatch). Default from a public vLLM 0.19 MoE run "
        "(docs/accuracy.md)."))
    eager_gap_layer_s: float = Field(EAGER_GAP_LAYER_S, ge=0.0, le=1.0, description=(
        "vllm_v1: GPU seconds one layer of a step too large for vLLM's CUDA graphs takes beyond "
        "its kernels (launched one by one: the gaps between them a graph replay removes, the "
        "eager all-reduce's copy into its buffer); added to such a step's GPU work. Default from "
        "public vLLM 0.15 runs' first-token tails (docs/accuracy.md); 0 = none."))

    def max_batch_requests(self) -> int:
        return self.max_num_seqs

    def profile_batch(self, max_model_len: int) -> tuple[int, int]:
        tokens = self.max_num_batched_tokens or V1_BATCHED_TOKENS    # vLLM's profile_run: one dummy step
        return tokens, min(self.max_num_seqs or tokens, tokens)

    def prefill_chunk(self) -> int | None:
        budget = self.max_num_batched_tokens or V1_BATCHED_TOKENS
        return min(budget, self.long_prefill_token_threshold or budget)

    def overlap_schedule(self, num_stages: int) -> bool:
        return self.async_scheduling and num_stages == 1

    def overlapped_cpu_phases(self) -> tuple[str, ...]:
        return ("schedule", "prepare_inputs", "process_outputs")

    def host_phase_scale(self) -> float:
        return self.host_scale

    def client_latency_s(self) -> float:
        return self.api_server_s

    def eager_launch(self) -> tuple[int, float, float, float] | None:
        if not (self.eager_layer_s or self.eager_moe_layer_s or self.eager_gap_layer_s):
            return None
        graph = min(2 * self.max_num_seqs or GRAPH_TOKENS_CAP, GRAPH_TOKENS_CAP,
                    self.max_num_batched_tokens or V1_BATCHED_TOKENS)
        return graph, self.eager_layer_s, self.eager_moe_layer_s, self.eager_gap_layer_s

    def kv_offload_gib(self) -> float:
        return self.kv_offloading_size

    def check_scenario(self, scenario: SimulationConfig) -> None:
        super().check_scenario(scenario)
        if self.kv_offloading_size and not self.enable_prefix_caching:
            raise ValueError("scheduler.kv_offloading_size: KV offloading keeps prefix-cache blocks, "
                             "so it needs scheduler.enable_prefix_caching")


class VllmV1Scheduler(EngineScheduler):
    traits = PolicyTraits(VllmV1Config, "vLLM V1 engine (v0.33)", memory_planner="vllm", has_prefix_cache=True)
    config: VllmV1Config

    def __init__(self, replica_id: int, num_stages: int, config: VllmV1Config, limits: ReplicaLimits,
                 recorder: Recorder) -> None:
        super().__init__(replica_id, num_stages, config, limits, recorder)
        cfg = self.config
        self.max_seqs = cfg.max_num_seqs or UNBOUNDED
        self.by_priority = cfg.scheduling_policy == "priority"
        self._threshold = 0   # this step's long_prefill_token_threshold (0: none)
        if self.by_priority:
            self.waiting = PriorityQueue()
        self.async_steps = cfg.async_scheduling and num_stages == 1
        self.in_flight = InFlight()   # async: steps launched whose outputs are not processed yet
        offload = limits.offload if self.caching else None
        self.offload = OffloadConnector(offload, self._block_size, replica_id, recorder) if offload else None
        self._loaded_now: dict[int, int] = {}   # offload: loaded tokens of requests admitted this step
        # the pool as a prefix cache (caching on), else None: read on the hot paths
        self._cache = self.pool if isinstance(self.pool, HashedBlockPool) else None
        self._formed: V1Step | None = None   # the step `launch` is about to launch (_next_batch)

    def _make_pool(self) -> KvPool:
        if not self.config.enable_prefix_caching:
            return super()._make_pool()
        replica, recorder = self.replica_id, self._recorder
        # key events are recorded only at the level that keeps block events (else no call at all)
        on_cache = (lambda blocks, delta: recorder.on_cache(replica, blocks, delta)) if recorder.keeps_blocks else None
        return HashedBlockPool(self._limits.num_blocks, self._block_size, on_cache)

    @property
    def _hashed(self) -> HashedBlockPool:
        """The pool, which is a prefix cache when caching is on (callers check `caching`)."""
        assert self._cache is not None, "prefix caching is off"
        return self._cache

    def on_schedule(self) -> list[Batch]:
        """Async scheduling: schedule while fewer than two steps are in flight, when the host is
        free (idle, or its outputs of the oldest step just processed)."""
        if not self.async_steps:
            return super().on_schedule()
        if not self.in_flight.host_free:
            return []   # the host waits for the oldest step's outputs
        self.in_flight.host_free = False
        return super().on_schedule()

    def _has_room(self) -> bool:
        return len(self.in_flight) < 2 if self.async_steps else super()._has_room()

    def _next_batch(self) -> Batch | None:
        # A step that preempted everyone it reached schedules nothing; vLLM's engine loop would
        # call schedule() again at once (no GPU work in between): so do we. With a step in
        # flight (async) it waits for that step's outputs first.
        while True:
            step = self._step()
            if step.requests or not step.preempted or self.in_flight:
                self._formed = step
                return self.launch(step.requests, step.num_tokens)

    def launch(self, requests: list[Request], num_tokens: list[int], num_padding: int = 0) -> Batch | None:
        computed = [] if self.offload is None else [   # the tokens each request has once the step ran
            self.computed(r) + n for r, n in zip(requests, num_tokens)]
        formed, self._formed = self._formed, None
        if formed is not None and formed.requests is not requests:
            formed = None   # (not the step _next_batch formed)
        if not self.async_steps:
            batch = super().launch(requests, num_tokens, num_padding)
        else:
            batch = self._make_batch(requests, num_tokens, None if formed is None else formed.prefill)
            if batch is not None:   # in flight, yet schedulable again: not `busy`
                self.in_flight.launch(batch, None if formed is None else formed.tokens)
        if self.offload is not None and batch is not None:
            self.offload.on_launch(batch, computed, [self.keys(r) for r in requests])
        return batch

    def after_batch(self, batch: Batch) -> None:
        if self.async_steps:
            self.in_flight.land(batch)
        if self.offload is not None:
            self.offload.on_batch_end(batch)
        stale = batch.stale
        # async with caching: vLLM keys the blocks a step's outputs completed once it has them
        # (placeholders before); a member whose newest full block is keyed already is skipped
        keyed_of = self._cache.keyed.get if self.async_steps and self._cache is not None else None
        if not stale:   # the usual step: nobody preempted while it ran
            self._after_step(batch, keyed_of)
            return
        size = self._block_size
        for request in batch.requests:
            if request.id in stale:
                if request.completed:   # preempted, its last token came with the stale output
                    self.waiting.remove(request)
                    self._keys.pop(request.id, None)
                    if self.offload is not None:
                        self.offload.on_finished(request)
            elif request.completed:
                self.finish(request)
            elif keyed_of is not None and request.is_prefill_complete:
                kv_tokens = request.num_processed_tokens - 1   # `kv_tokens`: its newest token's KV is not computed
                if kv_tokens // size > keyed_of(request.id, 0):
                    self._key_blocks(request, kv_tokens)

    def _after_step(self, batch: Batch, keyed_of: Callable[[int, int], int] | None) -> None:
        """`after_batch` of a step whose outputs are all fresh (the hot path: once per member
        and step)."""
        if keyed_of is None:
            for request in batch.requests:
                if request.completed:
                    self.finish(request)
            return
        # A member of the step now in flight (the one after this) is keyed already up to its KV
        # tokens: that step's formation keyed it up to the tokens it knew then, which this
        # step's landing has made its KV tokens (a prompt's last chunk: its prompt, as the
        # placeholder behind it keyed). Only the others can have a block to key.
        size, held = self._block_size, self.in_flight.by_id
        for request in batch.requests:
            if request.completed:
                self.finish(request)
            elif request.id not in held and request.is_prefill_complete:
                kv_tokens = request.num_processed_tokens - 1   # `kv_tokens`: its newest token's KV is not computed
                if kv_tokens // size > keyed_of(request.id, 0):
                    self._key_blocks(request, kv_tokens)

    def _step(self) -> V1Step:
        step = V1Step(self.config.max_num_batched_tokens or V1_BATCHED_TOKENS)
        self._loaded_now.clear()
        # the threshold keeps a long prompt from starving the others; alone, it has nobody to starve
        self._threshold = self.config.long_prefill_token_threshold if len(self.running) + len(self.waiting) > 1 else 0
        runnable = self.runnable()
        if self.config.prioritize_prefill:
            self._run(step, [r for r in runnable if not r.is_prefill_complete])
            if not (step.preempted or step.blocked):
                self._admit(step)
            self._run(step, [r for r in runnable if r.is_prefill_complete])
        else:
            self._run(step, runnable)
            if not (step.preempted or step.blocked):
                self._admit(step)
        return step

    def clamp(self, num_tokens: int, budget: int) -> int:
        threshold = self._threshold
        if 0 < threshold < num_tokens:
            num_tokens = threshold
        return min(num_tokens, budget)

    # ---- phase 1: running requests -----------------------------------------------------------

    def _run(self, step: V1Step, candidates: list[Request]) -> None:
        """Phase 1: the running `candidates`, in order, while budget is left (the hot loop: once
        per running request and step). The usual async member, a decode whose step in flight
        samples its newest token (`_tokens_to_run` gives it n = 1, KV for its known tokens plus
        one, keys up to the known ones), is worked out inline, attributes bound once, and when
        its blocks already hold the next token it is scheduled inline too."""
        flying_of, size = self.in_flight.by_id.get, self._block_size
        add_request, add_tokens, scheduled_ids = step.requests.append, step.num_tokens.append, step.tokens
        running = RequestStatus.RUNNING
        prefill_role = self.endpoint.role == "prefill"
        budget = step.budget   # (a local: step.budget is set from it around _schedule_tokens and on leaving)
        for request in candidates:
            if budget <= 0:
                break
            rid = request.id
            if request.status != running or rid in scheduled_ids:
                continue  # preempted earlier in this step
            flying = flying_of(rid, 0)
            if flying == 1 and request.is_prefill_complete:
                known = request.num_processed_tokens
                if known + 1 >= (request.initial_prefill_tokens + 1 if prefill_role   # `_last_token`
                                 else request.num_prefill_tokens + request.num_decode_tokens):
                    continue   # that token is its last here: nothing more to run
                if known < request.num_blocks * size:   # no new block: `_schedule_tokens` inline
                    # and no key call: its blocks up to `known` are keyed already. The formation
                    # of the step in flight keyed it up to the tokens it knew then (known - 1 if
                    # the step that landed since held it, which keyed them again, else known);
                    # known - 1 and known fill as many blocks unless known is a multiple of the
                    # block size, and then it holds no block past them (its blocks were taken
                    # for at most `known` tokens). tests/test_v1_run.py checks this at every
                    # formation of random scenarios.
                    add_request(request)   # step.add(request, 1)
                    add_tokens(1)
                    budget -= 1
                    scheduled_ids[rid] = 1
                    continue
                n, kv_tokens, key_tokens = 1, known + 1, known
            else:
                n, kv_tokens, key_tokens = self._tokens_to_run(request, flying, prefill_role, budget)
                if n <= 0:
                    continue
            step.budget = budget
            if not self._schedule_tokens(step, request, n, kv_tokens, key_tokens):
                return
            budget = step.budget
        step.budget = budget

    def _tokens_to_run(self, request: Request, flying: int, prefill_role: bool, budget: int) -> tuple[int, int, int]:
        """What a running request runs this step, as vLLM's running loop works it out (`flying`:
        its tokens in the step in flight). Returns (n, kv_tokens, key_tokens): n the tokens it
        lags behind, clamped as `clamp` (<= 0: nothing to run); kv_tokens those its KV slots must
        hold then (the computed ones, its KV and its tokens in flight, plus n); key_tokens those
        whose blocks get keys (kv_tokens, but not past the tokens whose ids are known). A step in
        flight that samples its next token leaves a placeholder to run, unless that token is its
        last."""
        if request.is_prefill_complete:   # its newest output token's KV is not computed yet
            known = request.num_processed_tokens
            computed = known - 1 + flying
        else:
            known = request.num_prefill_tokens
            computed = request.num_processed_tokens + flying
        target = known
        if computed >= target and flying:   # its step in flight samples a token
            if computed + 1 >= self._last_token(request, prefill_role):
                return 0, computed, known   # that token is its last here: nothing more to run
            target += 1    # a placeholder for it
        n = target - computed   # `clamp`, inline
        threshold = self._threshold
        if 0 < threshold < n:
            n = threshold
        if n > budget:
            n = budget
        return n, computed + n, min(computed + n, known)

    @staticmethod
    def _last_token(request: Request, prefill_role: bool) -> int:
        """Tokens the request has when done here (`total_tokens`): a P/D prefill replica yields
        only the first output (vLLM's prefill instance runs with max_tokens 1)."""
        if prefill_role:
            return request.initial_prefill_tokens + 1
        return request.num_prefill_tokens + request.num_decode_tokens

    def _schedule_tokens(self, step: V1Step, request: Request, n: int, kv_tokens: int, key_tokens: int) -> bool:
        """Schedule `n` tokens of a running request whose KV then holds `kv_tokens`: blocks for
        them, preempting the tail of running when they do not fit; with caching, keys for the
        blocks the first `key_tokens` fill. True: the phase goes on, with the request scheduled,
        or (priority) preempted itself to make room for the others that outrank it; False ends the
        phase (FCFS: the request was the tail itself; PP > 1: it waits for the batch in flight)."""
        size = self._block_size
        needed = -(-kv_tokens // size) - request.num_blocks
        if needed > 0:
            if needed > self.pool.num_free and not self._make_room(step, request, needed):
                return self.by_priority and request.status == RequestStatus.WAITING   # priority: the others outrank it
            self._take(request, needed, key_tokens)
        elif self._cache is not None and key_tokens // size > self._cache.keyed.get(request.id, 0):
            self._key_blocks(request, key_tokens)
        step.add(request, n)
        return True

    def computed(self, request: Request) -> int:
        """Tokens vLLM counts as computed: those whose KV is computed and those in flight."""
        return self.kv_tokens(request) + self.in_flight.tokens(request)

    def _make_room(self, step: V1Step, request: Request, needed: int) -> bool:
        """Preempt the tail of running until `needed` blocks are free for a running request;
        False when the request itself was preempted (or, PP > 1, waits for the batch in flight)."""
        while needed > self.pool.num_free:
            victim = self._victim()
            if victim is request and self.busy:
                step.blocked = True   # PP > 1: wait for the batch in flight rather than give up
                return False
            if victim in step:
                step.remove(victim)
            if self.in_flight.tokens(victim):   # async: its step in flight still yields its token
                self.in_flight.preempt(victim, self.computed(victim) >= victim.num_known_tokens)
                victim.scheduled = True   # it ran, even if its step, formed this instant, starts after this one
            self.requeue(victim, front=True)
            step.preempted = True
            if victim is request:
                return False
        return True

    def _victim(self) -> Request:
        candidates = self.runnable()
        if self.by_priority:   # ties: the first in running order
            return max(candidates, key=lambda r: (r.priority, r.arrived_at))
        return candidates[-1]

    # ---- phase 2: waiting requests -----------------------------------------------------------

    def _admit(self, step: V1Step) -> None:
        waiting = self.waiting
        if self.offload is not None and not self._admit_loaded(step):
            return
        while waiting and step.budget > 0 and len(self.running) < self.max_seqs:
            request = waiting[0]
            hits = self._cached_prefix(request)
            computed = len(hits) * self._block_size
            # blocks for the whole prompt must fit, not only this chunk's (scheduler_reserve_full_isl)
            whole = ceil(request.num_prefill_tokens / self._block_size) - len(hits)
            fits = self._hashed.can_allocate(whole, hits) if self.caching else self.pool.can_allocate(whole)
            if not fits:
                return
            loading = self._start_load(request, hits) if self.offload is not None else None
            if loading is not None:
                if not loading:
                    return   # its load does not fit beside the prefills in flight: admissions stop
                continue
            n = self.clamp(request.num_prefill_tokens - computed, step.budget)
            needed = ceil((computed + n) / self._block_size) - len(hits)
            waiting.popleft()
            request.num_processed_tokens = computed
            if self.caching:
                self.count_hit(request, computed)
            self._take(request, needed, computed + n, hits)
            self.running.append(request)
            step.add(request, n)

    def _start_load(self, request: Request, hits: list[int]) -> bool | None:
        """Offload: when CPU blocks extend the GPU hit, take GPU blocks for both (the loaded
        ones keyed once loaded) and load them; the request leaves the queue (True). False: it
        has a CPU hit but its blocks do not fit; None: no CPU hit (the request's offers start
        again from its first block)."""
        assert self.offload is not None
        keys = self.keys(request)
        num_hits = self.offload.num_hit_blocks(request, keys, len(hits))
        if not num_hits:
            self.offload.on_admit(request)
            return None
        # vLLM keeps free the blocks in-flight prefills (loads included) still need, so that a
        # load never strands them: its whole prompt must fit beside that reservation
        whole = ceil(request.num_prefill_tokens / self._block_size) - len(hits)
        if not self._hashed.can_allocate(whole + self._prefill_reservation(), hits):
            return False
        self.waiting.popleft()
        self.count_hit(request, len(hits) * self._block_size)
        taken = self._hashed.allocate(request, num_hits, hits)
        self._recorder.on_allocate(self.replica_id, request.id, taken)
        request.status = RequestStatus.RUNNING   # holds blocks, runs nothing until loaded
        self.offload.start_load(request, keys, len(hits), num_hits)
        return True

    def _prefill_reservation(self) -> int:
        """Blocks the requests loading, loaded or still in their prompt need to hold their whole
        prompt (vLLM's `_inflight_prefill_reserved_blocks`)."""
        assert self.offload is not None
        size = self._block_size
        prefilling = [r for r in self.running if self.computed(r) < r.num_prefill_tokens]
        return sum(max(0, ceil(r.num_prefill_tokens / size) - r.num_blocks)
                   for r in (*prefilling, *self.offload.holders()))

    def _admit_loaded(self, step: V1Step) -> bool:
        """Offload: loaded requests first, in the order their loads ended, as vLLM drains the
        requests holding blocks before the waiting queue; False when one could not be admitted
        (the waiting queue then waits too)."""
        assert self.offload is not None
        ready = self.offload.ready
        while ready and step.budget > 0 and len(self.running) < self.max_seqs:
            request = ready[0]
            if not self.pool.can_allocate(ceil(request.num_prefill_tokens / self._block_size) - request.num_blocks):
                return False
            ready.popleft()
            computed, self._loaded_now[request.id] = self.offload.loaded_tokens(request)
            n = self.clamp(request.num_prefill_tokens - computed, step.budget)
            request.num_processed_tokens = computed
            self._take(request, max(0, ceil((computed + n) / self._block_size) - request.num_blocks), computed + n)
            self.running.append(request)
            step.add(request, n)
        return not ready

    def requeue(self, request: Request, front: bool) -> None:
        # a loaded request taken back before it ran: the undo subtracts its computed tokens from
        # its cached ones, which counted only its GPU hit (vLLM counts CPU hits apart)
        loaded = 0 if request.scheduled else self._loaded_now.pop(request.id, 0)
        super().requeue(request, front)
        request.num_cached_tokens += loaded

    def finish(self, request: Request) -> None:
        super().finish(request)
        if self.offload is not None:
            self.offload.on_finished(request)

    def _cached_prefix(self, request: Request) -> list[int]:
        if not self.caching:
            return []
        keys = self.keys(request)
        return self._hashed.cached_prefix(keys[: (request.num_prefill_tokens - 1) // self._block_size])

    def _take(self, request: Request, needed: int, upto: int, hits: Sequence[int] = ()) -> None:
        """Blocks for more tokens: the cached `hits` and `needed` new ones (the caller checked
        they fit); with caching, key the blocks the first `upto` tokens fill (the key call made
        only when it would key one: below `keyed` cache_blocks changes nothing)."""
        cache = self._cache
        if cache is not None:
            if needed or hits:
                taken = cache.allocate(request, needed, hits)
                if self._recorder.keeps_blocks:   # (else on_allocate is a no-op: not called)
                    self._recorder.on_allocate(self.replica_id, request.id, taken)
            if upto // self._block_size > cache.keyed.get(request.id, 0):
                self._key_blocks(request, upto)
        elif needed:
            self._allocate(request, needed)
        request.status = RequestStatus.RUNNING

    # ---- fast-forward, P/D and rejection -------------------------------------------------------

    def _steady_decode(self, batch: Batch, preempted: bool) -> SteadyDecode | None:
        # Decodes re-form unchanged while everyone running is in the batch (the budget covers
        # them) and no admission can start: it failed now on budget, slots or memory, none of
        # which loosens before a completion (KV only shrinks while decoding). With async steps
        # the batch is formed while the step before it runs: that step holds everyone running,
        # and the batch those whose last token is not in it. With caching a run replays the
        # keys each formation gives (SteadyDecode.keys_blocks) at its instant.
        if preempted or batch.num_prefill_tokens:
            return None
        in_flight = self._step_ahead_of(batch) if self.async_steps else None
        members = in_flight.requests if in_flight is not None else batch.requests
        if (self.async_steps and in_flight is None) or len(members) != len(self.running):
            return None
        # Offload: decodes store nothing (prompt blocks only), unless an earlier offer found the
        # CPU tier full; a load ending cuts the run as an arrival does (Simulator.on_load_done).
        if self.offload is not None and self.offload.has_unstored(members):
            return None
        waiting = bool(self.waiting) or (self.offload is not None and bool(self.offload.ready))
        if waiting and self.caching and self._head_follows_a_turn():
            return None
        # with caching a finished member's blocks stay cached (shared, or kept for later hits):
        # growth planning does not count them as spare; and each formation keys the members'
        # newly filled blocks, which can give a hand-off waiting in this decode replica's inbox
        # (a later turn of a member's session) the hits that let it in: no run while one waits
        return SteadyDecode(self, UNBOUNDED, past_completions=not waiting, growth="paged", keys_blocks=self.caching,
                            in_flight=in_flight, counts_frees=not self.caching, sequential_sums=in_flight is not None,
                            inbox_may_join=self.caching)

    def _step_ahead_of(self, batch: Batch) -> Batch | None:
        """Async: the step running while `batch` was formed, when it runs one decode token of
        each member and `batch` holds exactly its members whose last token is not in it (in
        order; none preempted); else None."""
        flight = self.in_flight.batches
        if len(flight) != 2 or flight[1] is not batch or batch.stale is not None:
            return None
        first = flight[0]
        if first.stale is not None or first.id + 1 != batch.id:
            return None
        # formed as a placeholder behind a prompt's last chunk, a step counted prompt tokens; by
        # now that chunk has landed, so it runs a decode of each member as any other
        # (the passes over the members in C: a Request compares by identity)
        if first.num_tokens.count(1) != len(first.num_tokens) or not all(map(_PREFILL_COMPLETE, first.requests)):
            return None
        follows = [r for r in first.requests if r.num_prefill_tokens + r.num_decode_tokens - r.num_processed_tokens > 1]
        return first if follows == batch.requests else None

    def _head_follows_a_turn(self) -> bool:
        """Whether the head of the queue is a later session turn: the keys a run gives its
        earlier turn's output blocks could lengthen its prefix hit, and so admit it."""
        previous = self.prefix.previous if self.prefix is not None else None
        return previous is not None and bool(self.waiting) and previous[self.waiting[0].id] >= 0

    def _resume_steady(self, first: Batch, live: list[Request], num_iterations: int) -> tuple[Batch, Batch | None]:
        if not self.async_steps:
            return super()._resume_steady(first, live, num_iterations)
        # formations 2..k ran in bulk: the last of them forms step k, queued behind step k-1
        flight = self.in_flight.batches
        assert len(flight) == 2 and flight[0] is first, "an async run starts with two steps in flight"
        last_tokens = None   # (decodes: one token each)
        if num_iterations == 2:
            last = flight[1]
        else:
            self.num_batches += num_iterations - 3
            made = self._make_batch(live, [1] * len(live), 0)
            assert made is not None, "the last iteration has live members"
            last, last_tokens = made, {r.id: 1 for r in live}
        # those whose last token is not in `last`
        after = [r for r in live if r.num_prefill_tokens + r.num_decode_tokens - r.num_processed_tokens > 1]
        queued = self._make_batch(after, [1] * len(after), 0)
        assert queued is not None, "an async run leaves members for the step it queues"
        self.in_flight = InFlight()
        self.in_flight.launch(last, last_tokens)
        self.in_flight.launch(queued, {r.id: 1 for r in after})
        self._on_steady_decode(first, last, num_iterations)
        return last, queued

    def _step_ended_in_run(self, batch: Batch) -> None:
        if self.offload is not None:   # the prompt blocks its launch offered become readable
            self.offload.on_batch_end(batch)

    def _release_in_run(self, request: Request) -> None:
        self._release(request)
        if self.offload is not None:
            self.offload.on_finished(request)

    def _key_blocks(self, request: Request, num_tokens: int) -> None:
        assert self._cache is not None, "only a prefix cache keys blocks"
        keys = self._keys.get(request.id)   # (the hot path: once per formation and member)
        self._cache.cache_blocks(request, self.keys(request) if keys is None else keys, num_tokens)

    def _make_endpoint(self) -> V1Endpoint:
        from sim_core.schedulers.vllm_v1_endpoint import V1Endpoint  # it reads this scheduler

        return V1Endpoint(self)

    def _release(self, request: Request) -> None:
        if self.caching:   # no-op stepwise; keeps a run's blocks cached whatever frees them
            self._key_blocks(request, self.kv_tokens(request))
        super()._release(request)

    def _rejection_reason(self, num_prefill_tokens: int, num_decode_tokens: int) -> str | None:
        peak = ceil(max(num_prefill_tokens, num_prefill_tokens + num_decode_tokens - 1) / self._block_size)
        if peak > self._limits.num_blocks:
            return (f"at its longest it needs {peak} KV blocks but the replica has {self._limits.num_blocks} "
                    "(vLLM needs the KV cache to hold a whole request)")
        return None
