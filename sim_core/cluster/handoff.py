"""P/D disaggregation: prefill replicas hand finished prompts to decode replicas over KV links.

Replica ids: the prefill pool is 0..P-1, the decode pool P..P+D-1. A request's life:

1. The prefill pool's router sends it to a prefill replica, which runs its prompt; the iteration
   that completes the prompt yields the first token (TTFT is measured there). A request with a
   single output token is done at that point and never moves.
2. Hand-off: the prefill replica forgets the request, but the prompt's KV blocks stay allocated
   there, held by a `KvHandle`. At the end of the instant (request order) the decode pool's
   router picks a decode replica and the request joins that replica's inbox (FIFO). If that
   replica cuts the request's outputs to the one it already has (sglang's request limit, lower
   on a smaller decode pool), the request is done there and then, and its blocks are freed.
3. Accept: whenever the decode replica schedules with a free pipeline slot, it allocates blocks
   for the inbox head if its policy admits it (`can_accept_transfer`), and so on down the inbox;
   the head waits for a later step otherwise (head-of-line). Blocks are allocated *before* the
   transfer, as a pulling decode engine does, so the KV always has a place to land.
4. Transfer: each prefill replica has one outgoing link that carries one transfer at a time,
   in order of acceptance (ties: request id). Time = latency + tokens x KV bytes per token /
   bandwidth (the KV of every layer and KV head, as the memory planner sizes it); the tokens are
   the prompt's, less those a decode replica with prefix caching already holds (vllm_v1).
5. When the transfer ends, the prefill replica frees the blocks and the request joins the decode
   replica's running requests; the gap to its second token includes steps 2-4.

Blocks are therefore held twice while a transfer is in flight. Preempted on the decode replica,
a request is recomputed there (its prompt and tokens so far), as engines do.

Each replica takes part through its scheduler's `endpoint` (schedulers/endpoint.py), which
applies its policy's rules; this module owns the inboxes, the links and the transfers.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from heapq import heappop, heappush
from typing import TYPE_CHECKING

import numpy as np

from sim_core.entities import NOT_YET, Batch, Request

if TYPE_CHECKING:
    from sim_core.config import DisaggregationConfig
    from sim_core.engine.routing import Router
    from sim_core.engine.simulator import Simulator
    from sim_core.schedulers.endpoint import ReplicaEndpoint

HANDOFF_PHASE, DISPATCH_PHASE = 1, 2   # end-of-instant keys: after released session turns (0)
TRANSFER_COLUMNS = ("request_id", "source_replica", "target_replica", "num_tokens", "num_bytes",
                    "handed_off_at", "accepted_at", "start", "end")


@dataclass(slots=True, eq=False)
class KvHandle:
    """The prompt's blocks left on the prefill replica during a hand-off: a block-pool holder
    standing in for the request (which meanwhile holds its decode replica's blocks)."""

    id: int
    replica_id: int
    num_blocks: int = 0
    blocks: list[int] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class Transfer:
    """One request's KV on its way from `source` to `target`."""

    request: Request
    source: int
    handle: KvHandle
    handed_off_at: float
    target: int = -1
    num_tokens: int = 0     # prompt tokens whose KV crosses the link (known at acceptance)
    num_bytes: int = 0
    accepted_at: float = NOT_YET
    started_at: float = NOT_YET


@dataclass(slots=True, eq=False)
class Link:
    """A prefill replica's outgoing KV link: accepted transfers wait in (accepted_at, id) order."""

    queue: list = field(default_factory=list)
    busy: bool = False
    dispatching: bool = False   # a dispatch is already due at the end of this instant


class DecodeView:
    """A decode replica as its router sees it: waiting requests include its inbox."""

    __slots__ = ("endpoint", "inbox")

    def __init__(self, endpoint: ReplicaEndpoint, inbox: deque[Transfer]) -> None:
        self.endpoint, self.inbox = endpoint, inbox

    @property
    def num_waiting(self) -> int:
        return self.endpoint.num_waiting + len(self.inbox)

    @property
    def num_outstanding(self) -> int:
        return self.endpoint.num_outstanding + len(self.inbox)

    @property
    def num_kv_blocks_used(self) -> int:
        return self.endpoint.num_kv_blocks_used

    def num_cached_blocks(self, request: Request) -> int:
        return self.endpoint.num_cached_blocks(request)


class Disaggregation:
    """Hand-offs, inboxes and links of a disaggregated run (owned by its Simulator)."""

    def __init__(self, simulator: Simulator, num_prefill: int, router: Router, config: DisaggregationConfig,
                 bytes_per_token: int) -> None:
        self.sim = simulator
        self.num_prefill = num_prefill
        self.router = router
        self.endpoints = [s.endpoint for s in simulator.schedulers]
        decode = self.endpoints[num_prefill:]
        self.inboxes: list[deque[Transfer]] = [deque() for _ in decode]
        self.views = [DecodeView(endpoint, inbox) for endpoint, inbox in zip(decode, self.inboxes)]
        self.links = [Link() for _ in range(num_prefill)]
        self.bytes_per_token = bytes_per_token
        self.bytes_per_s = config.link_bandwidth_gb_s * 1e9
        self.latency_s = config.link_latency_s
        self.in_flight: dict[int, Transfer] = {}       # handed off, prefill blocks not freed yet
        self.rows: dict[str, list] = {name: [] for name in TRANSFER_COLUMNS}

    def is_prefill(self, replica: int) -> bool:
        return replica < self.num_prefill

    def has_inbox(self, replica: int) -> bool:
        """Whether hand-offs wait in this (decode) replica's inbox."""
        return not self.is_prefill(replica) and bool(self.inboxes[replica - self.num_prefill])

    def handles(self, replica: int) -> list[KvHandle]:
        """Holders of a prefill replica's blocks that belong to handed-off requests."""
        return [t.handle for t in self.in_flight.values() if t.source == replica]

    # ---- 2. hand-off ------------------------------------------------------------------------

    def on_prefill_batch_end(self, replica: int, batch: Batch) -> None:
        """Requests whose prompt this batch completed leave the prefill replica."""
        sim = self.sim
        endpoint, now = self.endpoints[replica], sim.kernel.now
        for request in batch.requests:
            if request.is_prefill_complete and not request.completed:
                endpoint.hand_off(request)
                handle = KvHandle(request.id, replica, *request.hand_over_blocks())
                transfer = Transfer(request, replica, handle, now)
                self.in_flight[request.id] = transfer
                sim.kernel.at_instant_end((HANDOFF_PHASE, request.id), self._route, transfer)

    def _route(self, transfer: Transfer) -> None:
        index = self.router.route(transfer.request, self.views)
        target = self.num_prefill + index
        request = transfer.request
        self.endpoints[target].expect_transfer(request)
        if request.num_processed_tokens >= request.total_tokens:
            self._finish_unmoved(transfer)
            return
        transfer.target = request.replica_id = target
        self.inboxes[index].append(transfer)
        if self.sim.fast is not None:
            self.sim.fast.on_request_routed(target)
        self.sim.kernel.soon(self.sim.on_replica_schedule, target)

    def _finish_unmoved(self, transfer: Transfer) -> None:
        """The decode replica cut the request's outputs to those its prefill yielded (sglang: its
        request limit is lower than the prefill replica's): it is done now, at its prefill's end,
        and its KV never moves."""
        sim, source, request = self.sim, transfer.source, transfer.request
        del self.in_flight[request.id]
        self.endpoints[source].release_handoff(transfer.handle)
        request.finish(sim.kernel.now)
        sim.on_request_done(source, request)
        sim.record_replica(sim.schedulers[source])
        sim.kernel.soon(sim.on_replica_schedule, source)

    # ---- 3. accept ---------------------------------------------------------------------------

    def pull(self, replica: int) -> None:
        """A decode replica about to form batches accepts what it can from its inbox head."""
        inbox = self.inboxes[replica - self.num_prefill]
        endpoint, now = self.endpoints[replica], self.sim.kernel.now
        endpoint.key_landed()
        accepted = False
        while inbox and endpoint.can_accept_transfer(inbox[0].request):
            transfer = inbox.popleft()
            transfer.num_tokens = endpoint.accept_transfer(transfer.request)
            transfer.num_bytes = transfer.num_tokens * self.bytes_per_token
            transfer.accepted_at = now
            heappush(self.links[transfer.source].queue, (now, transfer.request.id, transfer))
            self._want_dispatch(transfer.source)
            accepted = True
        if accepted:
            self.sim.record_replica(self.sim.schedulers[replica])

    # ---- 4. transfer -------------------------------------------------------------------------

    def _want_dispatch(self, source: int) -> None:
        link = self.links[source]
        if not link.busy and not link.dispatching:
            link.dispatching = True
            self.sim.kernel.at_instant_end((DISPATCH_PHASE, source), self._dispatch, source)

    def _dispatch(self, source: int) -> None:
        link, kernel = self.links[source], self.sim.kernel
        link.dispatching = False
        if link.busy or not link.queue:
            return
        _, _, transfer = heappop(link.queue)
        link.busy = True
        now = kernel.now
        transfer.started_at = now
        end = now + self.transfer_time(transfer.num_bytes)
        kernel.at(end if end > now else math.nextafter(now, math.inf), self._on_transfer_end, transfer)

    def transfer_time(self, num_bytes: float) -> float:
        """Seconds one transfer of `num_bytes` occupies its link."""
        return self.latency_s + num_bytes / self.bytes_per_s

    # ---- 5. arrival --------------------------------------------------------------------------

    def _on_transfer_end(self, transfer: Transfer) -> None:
        sim, source, target, request = self.sim, transfer.source, transfer.target, transfer.request
        self.links[source].busy = False
        self.endpoints[source].release_handoff(transfer.handle)
        sim.record_replica(sim.schedulers[source])
        self.endpoints[target].on_transfer_done(request)
        del self.in_flight[request.id]
        self._record(transfer)
        if sim.fast is not None:
            sim.fast.on_request_routed(target)
        sim.kernel.soon(sim.on_replica_schedule, target)
        sim.kernel.soon(sim.on_replica_schedule, source)
        if self.links[source].queue:
            self._want_dispatch(source)

    def _record(self, transfer: Transfer) -> None:
        rows = self.rows
        for name, value in (("request_id", transfer.request.id), ("source_replica", transfer.source),
                            ("target_replica", transfer.target),
                            ("num_tokens", transfer.num_tokens), ("num_bytes", transfer.num_bytes),
                            ("handed_off_at", transfer.handed_off_at), ("accepted_at", transfer.accepted_at),
                            ("start", transfer.started_at), ("end", self.sim.kernel.now)):
            rows[name].append(value)

    def table(self) -> dict[str, np.ndarray]:
        """Completed transfers as columns (in completion order)."""
        kinds = {"num_bytes": np.int64, "handed_off_at": float, "accepted_at": float, "start": float, "end": float}
        return {name: np.asarray(values, dtype=kinds.get(name, np.int64)) for name, values in self.rows.items()}
