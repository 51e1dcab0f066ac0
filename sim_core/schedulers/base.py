"""What every replica scheduler shares: queues, the block pool, pipeline micro-batch slots.

Naming (Vidur's in brackets): `waiting` [request_queue] holds requests without KV blocks, in
FIFO order (restarted requests go to its front); `running` [preempted_requests] holds requests
that own KV blocks and are not in a batch right now. A policy implements `next_batch()`; the
base fills up to `num_stages` batches in flight.
"""

from __future__ import annotations

from collections import deque
from collections.abc import MutableSequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from sim_core.config import PolicyTraits, SchedulerConfig
from sim_core.entities import Batch, Request, RequestStatus
from sim_core.memory import BlockPool, CountingBlockPool
from sim_core.memory.kv_pool import BlockHolder, KvPool
from sim_core.results.record import Recorder
from sim_core.schedulers.waiting import WaitingQueue

if TYPE_CHECKING:
    from sim_core.cluster.handoff import KvHandle
    from sim_core.workload.model import Workload


@dataclass(frozen=True)
class ReplicaLimits:
    """Capacity figures a policy needs (from the config and the memory planner)."""

    num_blocks: int
    max_batch_size: int          # min(planner's max batch, batch_size_cap): orca / FT
    max_blocks_per_request: int  # max_model_len // block_size: orca / FT reservation
    max_model_len: int = 0       # vllm_v0: prompt limit and default token budget
    num_swap_blocks: int = 0     # vllm_v0: CPU swap space, in KV blocks per GPU


UNBOUNDED = 1 << 62


class SchedulerFactory(Protocol):
    """What the registry holds: a policy class (or a function-like object) with its traits;
    `config` is an instance of the policy's own config model (`traits.config`)."""

    traits: PolicyTraits

    def __call__(self, replica_id: int, num_stages: int, config: Any, limits: ReplicaLimits,
                 recorder: Recorder) -> ReplicaScheduler: ...


def arrival_time(request: Request) -> float:
    return request.arrived_at


class ReplicaScheduler:
    """Base of the batching policies of one replica (policy only: no clock, no cost model)."""

    traits: ClassVar[PolicyTraits]   # what the rest of the simulator may ask the policy (its config model...)

    def __init__(self, replica_id: int, num_stages: int, config: SchedulerConfig,
                 limits: ReplicaLimits, recorder: Recorder) -> None:
        self.replica_id = replica_id
        self.num_stages = num_stages
        self.config = config
        self.limits = limits
        self.block_size = config.block_size
        self.micro_batch_cap = config.batch_size_cap // num_stages
        self.pool: KvPool = (BlockPool if recorder.keeps_blocks else CountingBlockPool)(limits.num_blocks)
        self.recorder = recorder
        self.waiting: WaitingQueue = deque()
        self.running: MutableSequence[Request] = []
        self.num_running_batches = 0
        self.num_batches = 0  # batch ids are per replica: (replica_id, batch id) is unique
        self.num_preemptions = 0
        self.ignored: dict[int, str] = {}  # request id -> why the policy dropped it while queued
        self.incoming: dict[int, Request] = {}  # P/D decode replica: accepted, KV still on its way

    # ---- lifecycle -------------------------------------------------------------------------

    def add_request(self, request: Request) -> None:
        request.replica_id = self.replica_id
        request.status = RequestStatus.WAITING
        self.waiting.append(request)

    def attach_workload(self, workload: Workload, max_model_len: int) -> None:
        """Called once before the run: policies that read optional workload columns (priority,
        prefix keys) or max_model_len keep what they need."""
        return

    def on_schedule(self) -> list[Batch]:
        """Form batches until `num_stages` are in flight or the policy has nothing to run."""
        batches = []
        while self.num_running_batches < self.num_stages:
            batch = self.next_batch()
            if batch is None:
                break
            batches.append(batch)
            self.num_running_batches += 1
        return batches

    def next_batch(self) -> Batch | None:
        raise NotImplementedError

    def on_batch_end(self, batch: Batch) -> None:
        """Finished requests free their blocks; the others wait for their next batch."""
        self.num_running_batches -= 1
        for request in batch.requests:
            if request.completed:
                self.release(request)
            else:
                self.running.append(request)

    def rejection_reason(self, num_prefill_tokens: int, num_decode_tokens: int) -> str | None:
        """Why a request of this size can never be served here, or None if it can."""
        return None

    def check_integrity(self, holders: list[Request] | None = None) -> None:
        """Assert the policy's memory accounting is whole (`holders`: requests holding blocks)."""
        self.pool.check_integrity(holders)

    def stuck_location(self, request: Request) -> str:
        """Where an unfinished request was left when the run ended (for its reject reason)."""
        return "waiting in the queue" if not request.num_blocks else "holding KV blocks"

    # ---- steady decode (fast-forward) hooks --------------------------------------------------
    # A "steady" decode batch is one the policy will form again, unchanged, at every following
    # iteration until one of its requests finishes, a request arrives, or (per `growth`) KV
    # blocks run short. The simulator then advances those iterations in one step.

    growth: str | None = None  # how members take blocks while decoding: "paged", "per_token" or None
    frees_on_completion = True  # a finished request's blocks return to the pool at its batch end

    def steady_past_completions(self, batch: Batch) -> bool:
        """Whether, after a member of a steady batch finishes, the next formation is surely the
        same batch without it (nobody else could join); False ends a run at the first finish."""
        return False

    def steady_decode_limit(self, batch: Batch, preempted: bool) -> int:
        """Upper bound on iterations, the one just formed included, that will re-form `batch`
        exactly if no request arrives (completions and block growth are checked by the caller);
        0 when the policy cannot promise it."""
        return 0

    def on_steady_decode(self, first: Batch, last: Batch, num_iterations: int) -> None:
        """Policy bookkeeping after `num_iterations` identical decode iterations ran in one step;
        `last` is the batch object of the final iteration (still in flight)."""
        return

    # ---- P/D disaggregation ----------------------------------------------------------------
    # A prefill replica lets a request go once its prompt is done (`hand_off`; its blocks stay,
    # held by a handle, until the KV transfer ends: `release_handoff`). A decode replica takes it
    # over: it allocates blocks for the prompt's KV when it accepts the request, before the
    # transfer (`incoming` until then), and the request decodes like any running one once the KV
    # has arrived (`on_transfer_done`).

    role = "replicas"   # "prefill" or "decode" in a disaggregated run (set by `join_pool`)

    def join_pool(self, role: str) -> None:
        """Called once before the run with this replica's pool ("replicas", "prefill", "decode")."""
        self.role = role

    def hand_off(self, request: Request) -> None:
        """Forget a request whose prompt this (prefill) replica has just completed."""
        self.running.remove(request)

    def release_handoff(self, handle: KvHandle) -> None:
        """The KV of a handed-off request has left: free the blocks its `handle` holds."""
        self._free_holder(handle)   # not a policy's release: that one books a live request

    def expect_transfer(self, request: Request) -> None:
        """A hand-off was routed to this (decode) replica and waits in its inbox."""
        return

    def transfer_blocks(self, request: Request) -> int:
        """Blocks a decode replica allocates for a handed-off request's prompt KV."""
        return -(-request.num_prefill_tokens // self.block_size)

    def can_accept_transfer(self, request: Request) -> bool:
        """Whether this (decode) replica can allocate a handed-off request's blocks now."""
        return (self.pool.num_holders < self.config.batch_size_cap
                and self.pool.can_allocate(self.transfer_blocks(request)))

    def accept_transfer(self, request: Request) -> int:
        """Allocate the blocks the request's KV will be written to (caller checked
        can_accept_transfer); returns the prompt tokens whose KV must cross the link."""
        request.replica_id = self.replica_id
        self.incoming[request.id] = request
        return self.take_transfer(request)

    def take_transfer(self, request: Request) -> int:
        """The policy's allocation for an accepted hand-off (see accept_transfer)."""
        self.allocate(request, self.transfer_blocks(request))
        return request.num_prefill_tokens

    def on_transfer_done(self, request: Request) -> None:
        """The request's KV has arrived: it decodes from the next formation on."""
        del self.incoming[request.id]
        self.running.append(request)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    # ---- shared mechanics ------------------------------------------------------------------

    def make_batch(self, requests: list[Request], num_tokens: list[int],
                   num_prefill_tokens: int | None = None) -> Batch | None:
        """A new batch (None when empty); pass `num_prefill_tokens` when known (0 for decodes)."""
        if not requests:
            return None
        if num_prefill_tokens is None:
            num_prefill_tokens = Batch.prefill_tokens_of(requests, num_tokens)
        self.num_batches += 1
        return Batch(self.num_batches - 1, self.replica_id, requests, num_tokens, num_prefill_tokens)

    @staticmethod
    def next_num_tokens(request: Request) -> int:
        """Whole remaining prompt for a request in prefill, else one decode token."""
        return 1 if request.is_prefill_complete else request.num_prefill_tokens

    def allocate(self, request: Request, num_blocks: int) -> None:
        if not request.num_blocks:
            request.status = RequestStatus.RUNNING
        blocks = self.pool.allocate(request, num_blocks)
        self.recorder.on_allocate(self.replica_id, request.id, blocks)

    def release(self, request: Request) -> None:
        self._free_holder(request)

    def _free_holder(self, holder: BlockHolder) -> None:
        blocks = self.pool.free(holder)
        self.recorder.on_free(self.replica_id, holder.id, blocks)

    def preempt(self, request: Request) -> None:
        """Recompute preemption: restart the request, free its blocks, queue it at the front."""
        request.restart()
        self.num_preemptions += 1
        self.release(request)
        request.status = RequestStatus.WAITING
        self.waiting.appendleft(request)
        self.recorder.on_restart(self.replica_id, request.id)
