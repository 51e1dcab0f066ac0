"""What every replica scheduler shares: queues, admission, batch formation, block allocation.

Naming (Vidur's in brackets): `waiting` [request_queue] holds requests without KV blocks, in
FIFO order (restarted requests go to its front); `running` [preempted_requests] holds requests
that own KV blocks and are not in a batch right now. A policy implements `_next_batch()`; the
base fills up to `num_stages` batches in flight.

Public members are what the simulator calls; `_`-prefixed ones are the policies' extension
points and helpers. Two companions carry the rest: `endpoint` (schedulers/endpoint.py) is the
replica as the cluster sees it (the run's entry point, the routers, the P/D hand-off), and
`steady_decode` returns the promise fast-forward relies on (schedulers/steady.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, MutableSequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from sim_core.config import PolicyTraits, SchedulerConfig
from sim_core.entities import Batch, Request, RequestStatus
from sim_core.memory import BlockPool, CountingBlockPool
from sim_core.memory.kv_pool import BlockHolder, KvPool
from sim_core.results.record import Recorder
from sim_core.schedulers.endpoint import ReplicaEndpoint
from sim_core.schedulers.waiting import WaitingQueue

if TYPE_CHECKING:
    from sim_core.memory.cpu_tier import OffloadSize
    from sim_core.schedulers.steady import SteadyDecode
    from sim_core.workload.model import Workload


@dataclass(frozen=True)
class ReplicaLimits:
    """Capacity figures a policy needs (from the config and the memory planner)."""

    num_blocks: int
    max_batch_size: int          # min(planner's max batch, batch_size_cap): orca / FT
    max_blocks_per_request: int  # max_model_len // block_size: orca / FT reservation
    max_model_len: int = 0       # vllm_v0: prompt limit and default token budget
    num_swap_blocks: int = 0     # vllm_v0: CPU swap space, in KV blocks per GPU
    offload: OffloadSize | None = None   # vllm_v1: the CPU tier of KV offloading (None: off)


UNBOUNDED = 1 << 62


class SchedulerFactory(Protocol):
    """What the registry holds: a policy class (or a function-like object) with its traits;
    `config` is an instance of the policy's own config model (`traits.config`)."""

    traits: PolicyTraits

    def __call__(self, replica_id: int, num_stages: int, config: Any, limits: ReplicaLimits,
                 recorder: Recorder) -> ReplicaScheduler: ...


# a request's arrival time: the sort key of several policies (attrgetter: no Python frame per call)
arrival_time: Callable[[Request], float] = attrgetter("arrived_at")


class ReplicaScheduler:
    """Base of the batching policies of one replica (policy only: no clock, no cost model)."""

    traits: ClassVar[PolicyTraits]   # what the rest of the simulator may ask the policy (its config model...)

    def __init__(self, replica_id: int, num_stages: int, config: SchedulerConfig,
                 limits: ReplicaLimits, recorder: Recorder) -> None:
        self.replica_id = replica_id
        self.num_stages = num_stages
        self.config = config
        self._limits = limits
        self._block_size = config.block_size
        self._micro_batch_cap = config.batch_size_cap // num_stages
        self._recorder = recorder
        self.pool: KvPool = self._make_pool()
        self.waiting: WaitingQueue = deque()
        self.running: MutableSequence[Request] = []
        self._num_running_batches = 0
        self.num_batches = 0  # batch ids are per replica: (replica_id, batch id) is unique
        self._num_preemptions = 0
        self._preemptions_before = 0  # _num_preemptions when the current formation started
        self.endpoint = self._make_endpoint()

    def _make_pool(self) -> KvPool:
        """The replica's KV block pool (a policy with its own kind of pool overrides this): ids
        are tracked only when the record level keeps block events. Called by the base's
        constructor: it may read only what the base has set before (the config, limits, block
        size, recorder and replica id)."""
        return (BlockPool if self._recorder.keeps_blocks else CountingBlockPool)(self._limits.num_blocks)

    def _make_endpoint(self) -> ReplicaEndpoint:
        """The replica's cluster-facing side (a policy whose hand-off differs overrides this)."""
        return ReplicaEndpoint(self)

    # ---- lifecycle (the simulator's calls) ---------------------------------------------------

    def add_request(self, request: Request) -> None:
        """A request routed to this replica joins the back of its queue."""
        request.replica_id = self.replica_id
        request.status = RequestStatus.WAITING
        self.waiting.append(request)

    def on_schedule(self) -> list[Batch]:
        """Form batches until `num_stages` are in flight or the policy has nothing to run."""
        self._preemptions_before = self._num_preemptions
        batches = []
        while self._has_room():
            batch = self._next_batch()
            if batch is None:
                break
            batches.append(batch)
            self._num_running_batches += 1
        return batches

    def _has_room(self) -> bool:
        """Whether another batch may be formed now: one per pipeline stage in flight."""
        return self._num_running_batches < self.num_stages

    def on_batch_end(self, batch: Batch) -> None:
        """Finished requests free their blocks; the others wait for their next batch."""
        self._end_steady(batch.requests)

    def _end_steady(self, requests: list[Request]) -> None:
        """`on_batch_end` of a batch of `requests` (also a decode run's last iteration, which
        forms no batch: SteadyDecode.end_batch)."""
        self._num_running_batches -= 1
        wait = self.running.append
        for request in requests:
            if request.completed:
                self._release(request)
            else:
                wait(request)


    def check_integrity(self, holders: list[Request] | None = None) -> None:
        """Assert the policy's memory accounting is whole (`holders`: requests holding blocks)."""
        self.pool.check_integrity(holders)

    def steady_decode(self, batch: Batch) -> SteadyDecode | None:
        """Whether the decode batch just formed will re-form unchanged (see steady.py): the
        policy's promise for fast-forward, or None."""
        return self._steady_decode(batch, self._num_preemptions != self._preemptions_before)

    # ---- the policy's hooks ------------------------------------------------------------------

    def _next_batch(self) -> Batch | None:
        """The policy's next batch, or None when it has nothing to run now."""
        raise NotImplementedError

    def _attach_workload(self, workload: Workload) -> None:
        """Called once before the run: policies that read optional workload columns (priority,
        prefix keys) keep what they need."""
        return

    def _rejection_reason(self, num_prefill_tokens: int, num_decode_tokens: int) -> str | None:
        """Why a request of this size can never be served here, or None if it can."""
        return None

    def _steady_decode(self, batch: Batch, preempted: bool) -> SteadyDecode | None:
        """The promise for `batch` (`preempted`: this formation preempted someone); None when
        the policy cannot promise anything."""
        return None

    def _resume_steady(self, first: Batch, live: list[Request], num_iterations: int) -> tuple[Batch, Batch | None]:
        """After a fast-forwarded run of `first` (see SteadyDecode.resume): the skipped
        iterations' batch ids, then the last iteration's batch (and no step queued behind it)."""
        self.num_batches += num_iterations - 2
        last = self._make_batch(live, [1] * len(live), 0)
        assert last is not None, "the last iteration has live members"
        self._on_steady_decode(first, last, num_iterations)
        return last, None

    def _skip_steady(self, num_iterations: int) -> int:
        """The batch ids of a decode run's iterations after its first, all run in one step
        (SteadyDecode.skip_batches); returns the last one's."""
        self.num_batches += num_iterations - 1
        return self.num_batches - 1

    def _step_ended_in_run(self, batch: Batch) -> None:
        """A batch formed before a decode run ended inside it (SteadyDecode.step_ended)."""
        return

    def _release_in_run(self, request: Request) -> None:
        """A member of a decode run finished inside it (SteadyDecode.release)."""
        self._free_holder(request)

    def _key_blocks(self, request: Request, num_tokens: int) -> None:
        """Key the blocks `num_tokens` tokens fill (SteadyDecode.key_blocks; prefix caches only)."""
        raise NotImplementedError("only a policy whose promise keys blocks replays keys")

    def _on_steady_decode(self, first: Batch, last: Batch, num_iterations: int) -> None:
        """Policy bookkeeping after `num_iterations` identical decode iterations ran in one step
        (their tokens and blocks already applied); `last` is the final iteration's batch."""
        return

    # ---- shared mechanics ------------------------------------------------------------------

    def _make_batch(self, requests: list[Request], num_tokens: list[int],
                    num_prefill_tokens: int | None = None) -> Batch | None:
        """A new batch (None when empty); pass `num_prefill_tokens` when known (0 for decodes)."""
        if not requests:
            return None
        if num_prefill_tokens is None:
            num_prefill_tokens = Batch.prefill_tokens_of(requests, num_tokens)
        self.num_batches += 1
        return Batch(self.num_batches - 1, self.replica_id, requests, num_tokens, num_prefill_tokens)

    @staticmethod
    def _next_num_tokens(request: Request) -> int:
        """Whole remaining prompt for a request in prefill, else one decode token."""
        return 1 if request.is_prefill_complete else request.num_prefill_tokens

    def _allocate(self, request: Request, num_blocks: int) -> None:
        if not request.num_blocks:
            request.status = RequestStatus.RUNNING
        blocks = self.pool.allocate(request, num_blocks)
        self._recorder.on_allocate(self.replica_id, request.id, blocks)

    def _release(self, request: Request) -> None:
        self._free_holder(request)

    def _free_holder(self, holder: BlockHolder) -> None:
        """Free and record a holder's blocks (a request, or a P/D hand-off's handle)."""
        blocks = self.pool.free(holder)
        self._recorder.on_free(self.replica_id, holder.id, blocks)

    def _restart(self, request: Request) -> None:
        """Recompute preemption: restart the request, free its blocks, queue it at the front."""
        request.restart()
        self._num_preemptions += 1
        self._release(request)
        request.status = RequestStatus.WAITING
        self.waiting.appendleft(request)
        self._recorder.on_restart(self.replica_id, request.id)
