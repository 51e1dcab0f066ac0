"""`orca` (Orca as modelled by Vidur): iteration-level batching with worst-case reservation.

All running requests (in the order they came back) decode one token each, up to
max_batch_size = min(planner's max batch size, batch_size_cap); then new requests join, each
reserving max_model_len // block_size blocks up front and running its whole prompt in the same
batch. No preemption; blocks are freed when a request finishes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sim_core.config import PolicyTraits, SchedulerConfig
from sim_core.entities import Batch, Request
from sim_core.schedulers.base import UNBOUNDED, ReplicaScheduler
from sim_core.schedulers.endpoint import ReplicaEndpoint
from sim_core.schedulers.steady import SteadyDecode


class OrcaConfig(SchedulerConfig):
    """Orca reads only the shared knobs."""

    type: Literal["orca"] = Field("orca", description=(
        "iteration-level batching, reserves max_model_len per request, as Vidur models it"))


class OrcaScheduler(ReplicaScheduler):
    traits = PolicyTraits(OrcaConfig, "Orca as modelled by Vidur", memory_planner="vidur",
                          reserves_max_model_len=True)
    running: list[Request]

    def _steady_decode(self, batch: Batch, preempted: bool) -> SteadyDecode | None:
        # Orca reserves memory up front, so a decode-only batch with nobody left out recurs
        # until a request finishes (admission stays blocked: free memory does not change).
        if batch.num_prefill_tokens or self.running:
            return None
        return SteadyDecode(self, UNBOUNDED, past_completions=not self.waiting)

    def _make_endpoint(self) -> OrcaEndpoint:
        return OrcaEndpoint(self)

    def _next_batch(self) -> Batch | None:
        limit, reserve = self._limits.max_batch_size, self._limits.max_blocks_per_request
        requests = self.running[:limit]
        self.running = self.running[limit:]
        num_tokens = [self._next_num_tokens(r) for r in requests]
        waiting = self.waiting
        while waiting and len(requests) < limit and self.pool.can_allocate(reserve):
            request = waiting.popleft()
            self._allocate(request, reserve)
            requests.append(request)
            num_tokens.append(self._next_num_tokens(request))
        return self._make_batch(requests, num_tokens)


class OrcaEndpoint(ReplicaEndpoint):
    """A hand-off takes the same worst-case reservation as an admission."""

    scheduler: OrcaScheduler

    def can_accept_transfer(self, request: Request) -> bool:
        return self.scheduler.pool.can_allocate(self._transfer_blocks(request))

    def _transfer_blocks(self, request: Request) -> int:
        return self.scheduler._limits.max_blocks_per_request
