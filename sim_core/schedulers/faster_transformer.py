"""`faster_transformer` (static batching as modelled by Vidur).

A batch of up to max_batch_size new requests, each reserving max_model_len // block_size
blocks, re-runs with its unfinished members until all have finished; unfinished batches wait
in FIFO order and go before new ones. With PP > 1 a new static batch may form while another
is in flight.

Deviation from Vidur (a bug there): Vidur frees only the members of the batch's last
iteration, so blocks of members that finished earlier are never returned. Here every member's
blocks are freed when its static batch finishes.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from sim_core.config import PolicyTraits, SchedulerConfig
from sim_core.entities import Batch, Request
from sim_core.schedulers.base import UNBOUNDED, ReplicaScheduler
from sim_core.schedulers.steady import SteadyDecode

if TYPE_CHECKING:
    from sim_core.results.record import Recorder
    from sim_core.schedulers.base import ReplicaLimits


class FasterTransformerConfig(SchedulerConfig):
    """FasterTransformer reads only the shared knobs."""

    type: Literal["faster_transformer"] = Field("faster_transformer", description=(
        "static batches, as Vidur models it"))


class FasterTransformerScheduler(ReplicaScheduler):
    # a static batch cannot take over a request mid-generation: no P/D disaggregation
    traits = PolicyTraits(FasterTransformerConfig, "FasterTransformer (static batching) as modelled by Vidur",
                          memory_planner="vidur", reserves_max_model_len=True, supports_disaggregation=False,
                          pipeline_runs=True)

    def __init__(self, replica_id: int, num_stages: int, config: SchedulerConfig, limits: ReplicaLimits,
                 recorder: Recorder) -> None:
        super().__init__(replica_id, num_stages, config, limits, recorder)
        self.unfinished: deque[Batch] = deque()
        self.members: dict[int, list] = {}  # batch id -> every request of its static batch

    def on_batch_end(self, batch: Batch) -> None:
        self._num_running_batches -= 1
        members = self.members.pop(batch.id)
        if all(request.completed for request in batch.requests):
            for request in members:
                self._release(request)
        else:
            self.unfinished.append(batch)
            self.members[batch.id] = members

    def _steady_decode(self, batch: Batch, preempted: bool) -> SteadyDecode | None:
        # A static batch re-runs its unfinished members: unchanged until one of them finishes,
        # and it only loses members until it is done. Blocks return when the whole static batch
        # finishes.
        if batch.num_prefill_tokens:
            return None
        if self.num_stages == 1:
            return SteadyDecode(self, UNBOUNDED, past_completions=True, frees_on_completion=False)
        # pipeline: every static batch in flight re-runs alone at its batch end; a new one forms
        # only when a request arrives while the pipeline has room and the pool can reserve for it
        # (with room, nothing waits now: on_schedule would have formed it)
        assert not self.unfinished, "a static batch re-forms at its own batch end, none waits for it"
        joins = self._has_room() and self.pool.can_allocate(self._limits.max_blocks_per_request)
        return SteadyDecode(self, UNBOUNDED, past_completions=True, frees_on_completion=False,
                            micro_batches=self._num_running_batches, arrivals_join=joins)

    def _on_steady_decode(self, first: Batch, last: Batch, num_iterations: int) -> None:
        self.members[last.id] = self.members.pop(first.id)

    def _next_batch(self) -> Batch | None:
        if self.unfinished:
            previous = self.unfinished.popleft()
            members = self.members.pop(previous.id)
            requests = [r for r in previous.requests if not r.completed]
        else:
            requests = self._new_requests()
            members = requests
        batch = self._make_batch(requests, [self._next_num_tokens(r) for r in requests])
        if batch is not None:
            self.members[batch.id] = members
        return batch

    def _new_requests(self) -> list:
        limit, reserve = self._limits.max_batch_size, self._limits.max_blocks_per_request
        requests: list[Request] = []
        while self.waiting and len(requests) < limit and self.pool.can_allocate(reserve):
            request = self.waiting.popleft()
            self._allocate(request, reserve)
            requests.append(request)
        return requests
