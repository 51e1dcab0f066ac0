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


class OrcaConfig(SchedulerConfig):
    """Orca reads only the shared knobs."""

    type: Literal["orca"] = Field("orca", description=(
        "iteration-level batching, reserves max_model_len per request, as Vidur models it"))


class OrcaScheduler(ReplicaScheduler):
    traits = PolicyTraits(OrcaConfig, "Orca as modelled by Vidur", memory_planner="vidur",
                          reserves_max_model_len=True)
    running: list[Request]

    def steady_past_completions(self, batch: Batch) -> bool:
        return not self.waiting

    def steady_decode_limit(self, batch: Batch, preempted: bool) -> int:
        # Orca reserves memory up front, so a decode-only batch with nobody left out recurs
        # until a request finishes (admission stays blocked: free memory does not change).
        return 0 if batch.num_prefill_tokens or self.running else UNBOUNDED

    def transfer_blocks(self, request: Request) -> int:
        return self.limits.max_blocks_per_request  # the same worst-case reservation as admission

    def can_accept_transfer(self, request: Request) -> bool:
        return self.pool.can_allocate(self.limits.max_blocks_per_request)

    def next_batch(self) -> Batch | None:
        limit, reserve = self.limits.max_batch_size, self.limits.max_blocks_per_request
        requests = self.running[:limit]
        self.running = self.running[limit:]
        num_tokens = [self.next_num_tokens(r) for r in requests]
        waiting = self.waiting
        while waiting and len(requests) < limit and self.pool.can_allocate(reserve):
            request = waiting.popleft()
            self.allocate(request, reserve)
            requests.append(request)
            num_tokens.append(self.next_num_tokens(request))
        return self.make_batch(requests, num_tokens)
