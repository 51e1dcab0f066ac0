"""`vllm_v0`: the scheduler of vLLM's V0 engine (v0.6, `vllm/core/scheduler.py`).

Three queues: `waiting` (no KV), `running` (KV on the GPU), `swapped` (KV in CPU swap space).
A step without chunked prefill (`_schedule_default`):
1. if nothing is swapped, admit prompts from the waiting head (whole prompts) while the token
   budget, the sequence cap and the KV blocks allow; a prompt too long for the model or the
   cache is ignored. Admitted prompts form a prefill-only batch;
2. otherwise every running request decodes; when one finds no free block, the last request of
   `running` is preempted (the request itself when it is the last): recompute sends it back to
   the waiting head, swap copies its blocks to CPU;
3. only if nobody was preempted, swapped requests come back (swapped before waiting).
With chunked prefill (`_schedule_chunked`): running requests first (decodes and prompt
chunks), then swapped ones, then new prompt chunks, all within the token budget.
Parallel samples (`n`) form one group of sequences that is admitted, preempted, swapped and
restored as a whole (see seq_group.py and v0_blocks.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from sim_core.config import PolicyTraits, SchedulerConfig
from sim_core.config.scheduler import MaxNumBatchedTokens, MaxNumSeqs, WatermarkFraction
from sim_core.entities import Batch, Request
from sim_core.memory.cache_ops import CacheOps
from sim_core.memory.shared_blocks import RefCountedBlockPool, RefCountedCountingPool
from sim_core.memory.swap_space import SwapSpace
from sim_core.results.record import SWAPPED_IN
from sim_core.schedulers.base import UNBOUNDED, ReplicaScheduler
from sim_core.schedulers.endpoint import ReplicaEndpoint
from sim_core.schedulers.seq_group import SeqGroup
from sim_core.schedulers.steady import SteadyDecode
from sim_core.schedulers.v0_blocks import AllocStatus, V0BlockManager
from sim_core.schedulers.v0_budget import SchedulingBudget
from sim_core.schedulers.v0_preemption import V0Preemption

Scheduled = list[tuple[Request, int]]   # (request, tokens it runs this step), in queue order

if TYPE_CHECKING:
    from sim_core.results.record import Recorder
    from sim_core.schedulers.base import ReplicaLimits

V0_CHUNKED_TOKENS = 512   # max_num_batched_tokens when empty, with chunked prefill (vLLM v0's default)


class VllmV0Config(SchedulerConfig):
    """The knobs vllm_v0 reads."""

    type: Literal["vllm_v0"] = Field("vllm_v0", description=(
        "vLLM v0.6's V0-engine scheduler: waiting, running and swapped queues, swap or recompute "
        "preemption, parallel samples, optional chunked prefill"))
    watermark_blocks_fraction: WatermarkFraction
    max_num_seqs: MaxNumSeqs
    max_num_batched_tokens: MaxNumBatchedTokens
    enable_chunked_prefill: bool = Field(False, description=(
        "vllm_v0: decodes first, then swapped requests, then prompt chunks, all under one token "
        "budget (vLLM's --enable-chunked-prefill); off: an iteration is either prompts only "
        "(whole prompts) or decodes only."))
    preemption_mode: Literal["recompute", "swap"] = Field("recompute", description=(
        "vllm_v0: what a running request gives up when KV blocks run out: recompute (its blocks are "
        "freed; it re-joins the waiting queue's front and its tokens are prefilled again) or swap "
        "(its blocks are copied to CPU swap space over PCIe and copied back before it resumes). A "
        "request with several parallel samples is swapped in both modes, as vLLM does."))
    swap_space_gb: float = Field(4.0, ge=0.0, le=100_000.0, description=(
        "vllm_v0: CPU swap space per GPU in GiB (vLLM's --swap-space, default 4); a swap-out that "
        "does not fit falls back to recompute (vLLM aborts the engine there)."))

    def token_budget(self, max_model_len: int) -> int:
        """Tokens one iteration may process (vLLM v0's defaults when max_num_batched_tokens is empty)."""
        return self.max_num_batched_tokens or (V0_CHUNKED_TOKENS if self.enable_chunked_prefill
                                               else max(max_model_len, 2048))

    def max_batch_requests(self) -> int:
        return self.max_num_seqs

    def profile_batch(self, max_model_len: int) -> tuple[int, int]:
        tokens = self.token_budget(max_model_len)       # vLLM v0's profile_run: max_num_seqs dummy sequences
        return tokens, min(self.max_num_seqs or tokens, tokens)

    def prefill_chunk(self) -> int | None:
        return (self.max_num_batched_tokens or V0_CHUNKED_TOKENS) if self.enable_chunked_prefill else None

    def swap_space_gib(self) -> float:
        return self.swap_space_gb


class VllmV0Scheduler(V0Preemption, ReplicaScheduler):
    traits = PolicyTraits(VllmV0Config, "vLLM v0.6 (V0 engine)", memory_planner="vllm", serves_parallel_samples=True)
    config: VllmV0Config
    pool: RefCountedBlockPool | RefCountedCountingPool
    running: deque[Request]
    waiting: deque[Request]

    def __init__(self, replica_id: int, num_stages: int, config: VllmV0Config, limits: ReplicaLimits,
                 recorder: Recorder) -> None:
        super().__init__(replica_id, num_stages, config, limits, recorder)
        cfg, limits = self.config, self._limits
        watermark = int(cfg.watermark_blocks_fraction * limits.num_blocks)
        self.blocks = V0BlockManager(self.pool, SwapSpace(limits.num_swap_blocks), self._block_size, watermark,
                                     self._recorder, self.replica_id)
        self.running = deque()
        self.swapped: deque[Request] = deque()
        self.chunked = cfg.enable_chunked_prefill
        self.token_budget = cfg.token_budget(limits.max_model_len)
        self.max_num_seqs = cfg.max_num_seqs or UNBOUNDED
        self.prompt_limit = limits.max_model_len if self.chunked else min(limits.max_model_len, self.token_budget)
        self.pending_ops = CacheOps()          # copies of steps that formed no batch
        self._to_waiting: list[Request] = []   # this step's recomputed requests, in preemption order
        self._to_swapped: list[Request] = []   # this step's swapped-out requests
        self.ignored: dict[int, str] = {}   # request id -> why it was dropped while queued
        self._prefills_tried = True   # whether this step's formation tried the waiting queue (no chunking)

    def _make_pool(self) -> RefCountedBlockPool | RefCountedCountingPool:
        return (RefCountedBlockPool if self._recorder.keeps_blocks else RefCountedCountingPool)(self._limits.num_blocks)

    def _make_endpoint(self) -> V0Endpoint:
        return V0Endpoint(self)

    def add_request(self, request: Request) -> None:
        super().add_request(request)
        if request.num_seqs > 1:
            self.blocks.groups[request.id] = SeqGroup(request.num_seqs)

    # ---- one step ----------------------------------------------------------------------------

    def _next_batch(self) -> Batch | None:
        """One vLLM step. A step that formed no batch but changed the queues (preempted or
        ignored someone) is followed by another at once, as vLLM's engine steps again; its copies
        are charged to the next batch."""
        while True:
            changes, ops = self._num_changes(), CacheOps()
            requests, tokens = (self._schedule_chunked if self.chunked else self._schedule_default)(ops)
            self.waiting.extendleft(self._to_waiting)
            self.swapped.extend(self._to_swapped)
            self._to_waiting, self._to_swapped = [], []
            self.pending_ops.extend(ops)
            if requests:
                batch = self._make_batch(requests, tokens)
                assert batch is not None, "requests is not empty"
                if self.pending_ops:
                    batch.cache_ops, self.pending_ops = self.pending_ops, CacheOps()
                return batch
            if self._num_changes() == changes:
                return None

    def _num_changes(self) -> int:
        return self._num_preemptions + len(self.ignored)

    def _budget(self) -> SchedulingBudget:
        return SchedulingBudget(self.token_budget, self.max_num_seqs)

    def _schedule_default(self, ops: CacheOps) -> tuple[list, list]:
        budget = self._budget()
        for request in self.running:
            budget.add_seqs(request.id, request.num_seqs)
        self._prefills_tried = not self.swapped
        if not self.swapped:
            prefills = self._schedule_prefills(budget)
            if prefills[0]:
                return prefills
        decodes, _, preempted = self._schedule_running(budget, ops)
        if not preempted:
            decodes += self._schedule_swapped(budget, ops)[0]
        return [r for r, _ in decodes], [t for _, t in decodes]

    def _schedule_chunked(self, ops: CacheOps) -> tuple[list, list]:
        """Running decodes and chunks, then swapped, then new prompts; listed in the order they
        re-join `running` (vLLM's order after a chunked step)."""
        budget = self._budget()
        decodes, chunks, preempted = self._schedule_running(budget, ops)
        back = ([], []) if preempted else self._schedule_swapped(budget, ops)
        requests, tokens = self._schedule_prefills(budget)
        order = back[0] + back[1] + decodes + chunks + list(zip(requests, tokens))
        return [r for r, _ in order], [t for _, t in order]

    def _new_tokens(self, request: Request, budget: SchedulingBudget) -> int:
        """Tokens the request runs now: one per live sequence when decoding, else the rest of
        its prompt; with chunked prefill a single sequence is cut to the budget left (a group's
        decode does not fit a smaller budget: 0, where vLLM would overrun its budget)."""
        seqs = self.blocks.live_seqs(request)
        new = seqs if request.is_prefill_complete else request.num_prefill_tokens - request.num_processed_tokens
        if self.chunked:
            left = budget.remaining_tokens
            new = min(new, left) if seqs == 1 else (new if new <= left else 0)
        return new

    # ---- the three queues --------------------------------------------------------------------

    def _schedule_prefills(self, budget: SchedulingBudget) -> tuple[list, list]:
        requests, tokens, waiting = [], [], self.waiting
        while waiting:
            request = waiting[0]
            if request.num_prefill_tokens > self.prompt_limit:
                self._ignore(waiting.popleft(), self._too_long(request))
                continue
            if request.num_seqs > min(self.max_num_seqs, self.token_budget):
                self._ignore(waiting.popleft(), self._too_many_samples(request))
                continue
            status = self.blocks.can_allocate(request)
            if status is AllocStatus.LATER:
                break
            if status is AllocStatus.NEVER:
                self._ignore(waiting.popleft(), self._too_big(request))
                continue
            if budget.num_batched_tokens >= self.token_budget:
                break
            new = self._new_tokens(request, budget)
            if new == 0 or not budget.can_schedule(new, request.num_seqs):
                break
            waiting.popleft()
            self.blocks.allocate(request)
            requests.append(request)
            tokens.append(new)
            budget.add_tokens(request.id, new)
            budget.add_seqs(request.id, request.num_seqs)
        return requests, tokens

    def _schedule_running(self, budget: SchedulingBudget, ops: CacheOps) -> tuple[Scheduled, Scheduled, bool]:
        """Returns (decodes, prompt chunks) as (request, tokens) in queue order, and whether
        anything was preempted."""
        decodes: Scheduled = []
        chunks: Scheduled = []
        preempted, queue = False, self.running
        while queue:
            request = queue[0]
            new = self._new_tokens(request, budget)
            if new == 0:
                break
            queue.popleft()
            while not self.blocks.can_append(request):
                budget.subtract_tokens(request.id, new)
                budget.subtract_seqs(request.id, request.num_seqs)
                victim = queue.pop() if queue else request
                self._preempt(victim, ops)
                preempted = True
                if victim is request:
                    break
            else:
                self.blocks.append(request, ops)
                (decodes if request.is_prefill_complete else chunks).append((request, new))
                budget.add_tokens(request.id, new)
                if self.chunked:
                    budget.add_seqs(request.id, request.num_seqs)
        return decodes, chunks, preempted

    def _schedule_swapped(self, budget: SchedulingBudget, ops: CacheOps) -> tuple[list, list]:
        decodes: Scheduled = []
        chunks: Scheduled = []
        swapped = self.swapped
        while swapped:
            request = swapped[0]
            status = self.blocks.can_swap_in(request)
            if status is AllocStatus.LATER:
                break
            if status is AllocStatus.NEVER:
                reason = self._cannot_resume(request)
                self.blocks.swap.release(swapped.popleft().id)
                self._ignore(request, reason)
                continue
            new = self._new_tokens(request, budget)
            if new == 0 or not budget.can_schedule(new, request.num_seqs):
                break
            swapped.popleft()
            self.blocks.swap_in(request, ops)
            self._recorder.on_state(self.replica_id, request.id, SWAPPED_IN)
            self.blocks.append(request, ops)
            (decodes if request.is_prefill_complete else chunks).append((request, new))
            budget.add_tokens(request.id, new)
            budget.add_seqs(request.id, request.num_seqs)
        return decodes, chunks

    # ---- bookkeeping hooks -------------------------------------------------------------------

    def on_batch_end(self, batch: Batch) -> None:
        """Finished groups free their blocks; a group whose prompt just completed forks into its
        n sequences; the others re-join `running` in batch order."""
        self._num_running_batches -= 1
        for request in batch.requests:
            if request.completed:
                self.blocks.free(request)
                self.blocks.groups.pop(request.id, None)
                continue
            group = self.blocks.groups.get(request.id)
            if (group is not None and request.is_prefill_complete and not group.forked
                    and self.endpoint.role != "prefill"):   # a prefill replica hands the prompt over unforked
                self.blocks.fork(request)
            self.running.append(request)

    def _rejection_reason(self, num_prefill_tokens: int, num_decode_tokens: int) -> str | None:
        """Only a decode replica refuses up front (elsewhere vLLM ignores a prompt when it is
        reached): a prompt whose blocks it could never admit."""
        need, usable = -(-num_prefill_tokens // self._block_size), self._limits.num_blocks - self.blocks.watermark
        if self.endpoint.role == "decode" and need > usable:
            return (f"its prompt needs {need} KV blocks but a decode replica admits at most {usable} "
                    f"({self._limits.num_blocks} blocks minus a watermark of {self.blocks.watermark})")
        return None

    def check_integrity(self, holders: list[Request] | None = None) -> None:
        self.blocks.check_integrity(holders)

    def _steady_decode(self, batch: Batch, preempted: bool) -> SteadyDecode | None:
        # A decode-only batch of every running request, no copies, single sequences: the next
        # step admits nobody (the waiting head and the swapped head failed on memory, the
        # sequence cap or the budget, which decoding only tightens) and decodes the same batch.
        if preempted or batch.num_prefill_tokens or batch.cache_ops is not None or self.running:
            return None
        if any(request.num_seqs != 1 for request in batch.requests):
            return None
        # without chunking, prompts are tried only while nothing is swapped out: when this step
        # emptied the swapped queue (swapped its head in, or ignored it), the next one tries them
        if not self.chunked and self.waiting and not self.swapped and not self._prefills_tried:
            return None
        return SteadyDecode(self, UNBOUNDED, past_completions=not self.waiting and not self.swapped, growth="paged")


class V0Endpoint(ReplicaEndpoint):
    """A decode replica takes a hand-off as vLLM v0 admits a prompt (its blocks above the
    watermark), after anything swapped out has come back, while fewer than max_num_seqs requests
    hold KV here; a group forks into its n sequences once its prompt's KV has arrived."""

    scheduler: VllmV0Scheduler

    @property
    def ignored(self) -> Mapping[int, str]:
        return self.scheduler.ignored

    def stuck_location(self, request: Request) -> str:
        return "swapped out to CPU" if request in self.scheduler.swapped else super().stuck_location(request)

    def hand_off(self, request: Request) -> None:
        super().hand_off(request)
        self.scheduler.blocks.groups.pop(request.id, None)

    def can_accept_transfer(self, request: Request) -> bool:
        scheduler = self.scheduler
        return (not scheduler.swapped and scheduler.pool.num_holders < scheduler.max_num_seqs
                and scheduler.blocks.can_allocate(request) is AllocStatus.OK)

    def _take_transfer(self, request: Request) -> int:
        blocks = self.scheduler.blocks
        if request.num_seqs > 1:
            blocks.groups[request.id] = SeqGroup(request.num_seqs)
        blocks.allocate(request)
        return request.num_prefill_tokens

    def on_transfer_done(self, request: Request) -> None:
        blocks = self.scheduler.blocks
        if request.id in blocks.groups:
            blocks.fork(request)
        super().on_transfer_done(request)
