"""A replica as the cluster sees it: the pool it serves in, what it cannot serve there, and the
P/D hand-offs it gives (prefill) and takes over (decode).

The run's entry point, the routers and the hand-off (`cluster/handoff.py`) talk to a replica
through its scheduler's `endpoint`; the simulator's event handlers talk to the scheduler. A
policy whose rules here differ subclasses `ReplicaEndpoint` next to the policy and returns it
from `_make_endpoint()`. An endpoint is part of its scheduler: it uses the scheduler's
`_`-prefixed helpers (allocation, the policy's hooks) as the policy itself does.

A P/D hand-off, seen from the two endpoints: the prefill replica lets a request go once its
prompt is done (`hand_off`; its blocks stay, held by a handle, until the KV transfer ends:
`release_handoff`). The decode replica allocates blocks for the prompt's KV when it accepts the
request, before the transfer (`incoming` until then), and the request decodes like any
running one once the KV has arrived (`on_transfer_done`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim_core.cluster.handoff import KvHandle
    from sim_core.entities import Request
    from sim_core.schedulers.base import ReplicaScheduler
    from sim_core.workload.model import Workload

NOTHING_IGNORED: Mapping[int, str] = MappingProxyType({})


class ReplicaEndpoint:
    """The cluster-facing side of one replica's scheduler (policy defaults: blocks for the
    whole prompt, under the batch-size cap)."""

    def __init__(self, scheduler: ReplicaScheduler) -> None:
        self.scheduler = scheduler
        self.role = "replicas"   # "prefill" or "decode" in a disaggregated run (set by `join`)
        self.incoming: dict[int, Request] = {}   # decode replica: accepted, KV still on its way

    # ---- the run -------------------------------------------------------------------------------

    def join(self, role: str, workload: Workload) -> None:
        """Called once before the run: this replica serves in pool `role` ("replicas",
        "prefill" or "decode") and will be sent requests of `workload`."""
        self.role = role
        self.scheduler._attach_workload(workload)

    # whether the policy can load KV from a CPU tier (`take_loads` may report loads): a load's
    # end is an event of the replica the simulator's stage paths cannot order against
    loads_from_cpu_tier = False

    def take_loads(self) -> list[tuple[Request, float]]:
        """KV loads from a CPU tier (KV offload) started since the last call, each with its
        seconds; the simulator calls `on_load_done` when one ends. None for most policies."""
        return []

    def on_load_done(self, request: Request) -> None:
        """A load that `take_loads` reported has ended."""
        raise NotImplementedError("this policy loads no KV from a CPU tier")

    @property
    def num_waiting(self) -> int:
        """Requests waiting in the replica's queue (what routers compare and records show)."""
        return len(self.scheduler.waiting)

    @property
    def num_outstanding(self) -> int:
        """Requests the replica has taken and not finished (what least-load routers compare):
        those waiting and those holding KV blocks, i.e. running, in a batch now, or (decode)
        accepted hand-offs whose KV is on its way; a P/D prefill replica also counts hand-offs
        whose KV has not left yet. Policies differ on whether `running` includes requests in a
        batch, the block holders do not."""
        return len(self.scheduler.waiting) + self.scheduler.pool.num_holders

    @property
    def num_kv_blocks_used(self) -> int:
        """KV blocks held by requests now (what `least_kv` compares)."""
        return self.scheduler.pool.num_used

    def num_cached_blocks(self, request: Request) -> int:
        """Full blocks of the request's prompt this replica holds in its prefix cache now (none
        without one); changes nothing."""
        return 0

    def rejection_reason(self, num_prefill_tokens: int, num_decode_tokens: int) -> str | None:
        """Why a request of this size can never be served here, or None if it can (a prefill
        replica holds only the prompt and its first output token)."""
        outputs = 1 if self.role == "prefill" else num_decode_tokens
        return self.scheduler._rejection_reason(num_prefill_tokens, outputs)

    def stuck_location(self, request: Request) -> str:
        """Where an unfinished request was left when the run ended (for its reject reason)."""
        return "waiting in the queue" if not request.num_blocks else "holding KV blocks"

    @property
    def ignored(self) -> Mapping[int, str]:
        """Requests the policy dropped while queued, with why (vllm_v0 only)."""
        return NOTHING_IGNORED

    # ---- P/D: the prefill side ------------------------------------------------------------------

    def hand_off(self, request: Request) -> None:
        """Forget a request whose prompt this (prefill) replica has just completed."""
        self.scheduler.running.remove(request)

    def release_handoff(self, handle: KvHandle) -> None:
        """The KV of a handed-off request has left: free the blocks its `handle` holds."""
        self.scheduler._free_holder(handle)   # not a policy's release: that one books a live request

    # ---- P/D: the decode side -------------------------------------------------------------------

    def expect_transfer(self, request: Request) -> None:
        """A hand-off was routed to this (decode) replica and waits in its inbox."""
        return

    def can_pull(self) -> bool:
        """Whether this (decode) replica has a free micro-batch slot, so arrived transfers may
        join it now (the simulator pulls its inbox before forming batches)."""
        return self.scheduler._num_running_batches < self.scheduler.num_stages

    def can_accept_transfer(self, request: Request) -> bool:
        """Whether this (decode) replica can allocate a handed-off request's blocks now."""
        scheduler = self.scheduler
        return (scheduler.pool.num_holders < scheduler.config.batch_size_cap
                and scheduler.pool.can_allocate(self._transfer_blocks(request)))

    def accept_transfer(self, request: Request) -> int:
        """Allocate the blocks the request's KV will be written to (caller checked
        can_accept_transfer); returns the prompt tokens whose KV must cross the link."""
        request.replica_id = self.scheduler.replica_id
        self.incoming[request.id] = request
        return self._take_transfer(request)

    def on_transfer_done(self, request: Request) -> None:
        """The request's KV has arrived: it decodes from the next formation on."""
        del self.incoming[request.id]
        self.scheduler.running.append(request)

    def key_landed(self) -> None:
        """A formation begins (before the replica accepts transfers from its inbox): the
        transfers that landed since the last one become visible to prefix lookups (vllm_v1 keys
        their blocks now). Nothing for most policies."""
        return

    def _transfer_blocks(self, request: Request) -> int:
        """Blocks a decode replica allocates for a handed-off request's prompt KV."""
        return -(-request.num_prefill_tokens // self.scheduler._block_size)

    def _take_transfer(self, request: Request) -> int:
        """The policy's allocation for an accepted hand-off (see accept_transfer)."""
        self.scheduler._allocate(request, self._transfer_blocks(request))
        return request.num_prefill_tokens
