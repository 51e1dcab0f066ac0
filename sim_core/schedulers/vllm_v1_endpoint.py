"""vllm_v1's P/D side: a decode replica takes a hand-off as vLLM's KV connectors do."""

from __future__ import annotations

from math import ceil
from typing import TYPE_CHECKING

from sim_core.schedulers.engine import EngineEndpoint

if TYPE_CHECKING:
    from sim_core.entities import Request
    from sim_core.schedulers.vllm_v1 import VllmV1Scheduler


class V1Endpoint(EngineEndpoint):
    """As vLLM's KV connectors do, a decode replica with prefix caching looks the prompt up first
    and pulls only the blocks it does not hold; the pulled blocks get their keys in the first
    formation after they have arrived. A request waiting for its KV counts against max_num_seqs."""

    scheduler: VllmV1Scheduler

    def __init__(self, scheduler: VllmV1Scheduler) -> None:
        super().__init__(scheduler)
        self._landed: list[Request] = []   # KV arrived, blocks not keyed yet (key_landed)

    def can_pull(self) -> bool:
        scheduler = self.scheduler
        if not scheduler.async_steps:
            return super().can_pull()
        return scheduler.in_flight.host_free and len(scheduler.in_flight) < 2   # as its schedule() would

    def can_accept_transfer(self, request: Request) -> bool:
        scheduler = self.scheduler
        if len(scheduler.running) + len(self.incoming) >= scheduler.max_seqs:
            return False
        hits, needed = self._transfer_need(request)
        if scheduler.caching:
            return scheduler._hashed.can_allocate(needed, hits)
        return scheduler.pool.can_allocate(needed)

    def _take_transfer(self, request: Request) -> int:
        scheduler = self.scheduler
        hits, needed = self._transfer_need(request)
        if scheduler.caching:
            taken = scheduler._hashed.allocate(request, needed, hits)
            scheduler._recorder.on_allocate(scheduler.replica_id, request.id, taken)
        else:
            scheduler._allocate(request, needed)
        return request.num_prefill_tokens - len(hits) * scheduler._block_size

    def hand_off(self, request: Request) -> None:
        super().hand_off(request)
        if self.scheduler.offload is not None:   # done here, as vLLM's prefill instance finishes it
            self.scheduler.offload.on_finished(request)

    def on_transfer_done(self, request: Request) -> None:
        super().on_transfer_done(request)
        if self.scheduler.caching:
            self._landed.append(request)

    def key_landed(self) -> None:
        """Key the blocks of the transfers that landed since the last formation: vLLM caches a
        received prompt's blocks in the first schedule() after its KV arrived
        (`_update_waiting_for_remote_kv`, which reaches it in the waiting queue ahead of the
        requests that came after it), not when the transfer ends. Keyed then, they also stay
        in step order with a fast-forwarded run's keys, which the run makes at its end
        (engine/run_replay.py); a landing cuts the run, so its end comes first. Where this
        differs from vLLM: vLLM reaches the landed request in its waiting loop, after the
        running phase has keyed its blocks, and only when that phase preempted nobody and left
        room; here the landed blocks are keyed first, and the inbox is read before the running
        phase (vLLM looks a new remote request up in the same waiting loop). The key counts
        are those of `kv_tokens`, as for any running request (vLLM keys one block fewer when the
        prompt fills its last block exactly)."""
        scheduler = self.scheduler
        for request in self._landed:
            if not request.completed:
                scheduler._hashed.cache_blocks(request, scheduler.keys(request), scheduler.kv_tokens(request))
        self._landed.clear()

    loads_from_cpu_tier = True   # with kv_offloading_size set (the policy's offload tier)

    def take_loads(self) -> list[tuple[Request, float]]:
        offload = self.scheduler.offload
        return offload.take_loads() if offload is not None else []

    def on_load_done(self, request: Request) -> None:
        offload = self.scheduler.offload
        assert offload is not None, "only KV offload starts loads"
        offload.on_load_done(request)

    def _transfer_need(self, request: Request) -> tuple[list[int], int]:
        """(locally cached blocks of the prompt, new blocks for the rest of it)."""
        scheduler, prompt = self.scheduler, request.num_prefill_tokens
        size = scheduler._block_size
        hits = scheduler._hashed.cached_prefix(scheduler.keys(request)[: prompt // size]) if scheduler.caching else []
        return hits, ceil(prompt / size) - len(hits)
