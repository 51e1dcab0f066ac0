"""vllm_v0 with pipeline parallelism: vLLM v0's virtual engines.

With PP stages vLLM v0 runs PP virtual engines, each its own scheduler (its own waiting, running
and swapped queues) with num_blocks // PP GPU blocks and num_swap_blocks // PP CPU blocks, and at
most one batch in flight; a new request goes to the engine with the fewest unfinished requests
(ties: the lowest). Engine k's physical block ids are offset by k x its block count, so the
replica's KV map shows them side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from sim_core.entities import Batch, Request
from sim_core.errors import ConfigError
from sim_core.memory.kv_pool import BlockHolder
from sim_core.memory.shared_blocks import RefCountedBlockPool, RefCountedCountingPool
from sim_core.results.record import Recorder
from sim_core.schedulers.base import ReplicaLimits, ReplicaScheduler
from sim_core.schedulers.endpoint import ReplicaEndpoint
from sim_core.schedulers.vllm_v0 import VllmV0Config, VllmV0Scheduler

if TYPE_CHECKING:
    from sim_core.cluster.handoff import KvHandle
    from sim_core.workload.model import Workload


class VllmV0Factory:
    """The vllm_v0 policy of one replica: one scheduler (PP = 1) or PP virtual engines."""

    traits = VllmV0Scheduler.traits

    def __call__(self, replica_id: int, num_stages: int, config: VllmV0Config, limits: ReplicaLimits,
                 recorder: Recorder) -> ReplicaScheduler:
        if num_stages == 1:
            return VllmV0Scheduler(replica_id, 1, config, limits, recorder)
        return VllmV0Pipeline(replica_id, num_stages, config, limits, recorder)


vllm_v0_scheduler = VllmV0Factory()


class OffsetRecorder:
    """The run's recorder, with one engine's block ids shifted by `offset`."""

    def __init__(self, recorder: Recorder, offset: int) -> None:
        self._recorder, self._offset = recorder, offset

    def __getattr__(self, name: str) -> Any:
        return getattr(self._recorder, name)

    def on_allocate(self, replica: int, request: int, blocks: list[int]) -> None:
        self._recorder.on_allocate(replica, request, [b + self._offset for b in blocks])

    def on_allocate_one(self, replica: int, request: int, block: int) -> None:
        self._recorder.on_allocate_one(replica, request, block + self._offset)

    def on_free(self, replica: int, request: int, blocks: list[int]) -> None:
        self._recorder.on_free(replica, request, [b + self._offset for b in blocks])

    def on_refs(self, replica: int, blocks: list[int], refs: int) -> None:
        self._recorder.on_refs(replica, [b + self._offset for b in blocks], refs)


class PoolsView:
    """The replica's block counts over its engines' pools (what the simulator records)."""

    def __init__(self, pools: list[RefCountedBlockPool | RefCountedCountingPool]) -> None:
        self.pools = pools
        self.num_blocks = sum(p.num_blocks for p in pools)
        self.tracks_ids = pools[0].tracks_ids

    @property
    def num_used(self) -> int:
        return sum(p.num_used for p in self.pools)

    @property
    def num_free(self) -> int:
        return sum(p.num_free for p in self.pools)

    @property
    def num_holders(self) -> int:
        return sum(p.num_holders for p in self.pools)

    # The engines allocate from their own pools; the replica's view only counts. These complete
    # the KvPool interface of `ReplicaScheduler.pool` and are never called.

    def can_allocate(self, num: int) -> bool:
        raise NotImplementedError("each virtual engine allocates from its own pool")

    def allocate(self, request: Request, num: int) -> list[int]:
        raise NotImplementedError("each virtual engine allocates from its own pool")

    def free(self, request: BlockHolder) -> list[int]:
        raise NotImplementedError("each virtual engine frees into its own pool")

    def check_integrity(self, holders: list[Request] | None = None) -> None:
        raise NotImplementedError("VllmV0Pipeline.check_integrity checks each engine")


class VllmV0Pipeline(ReplicaScheduler):
    """PP virtual engines behind one replica; each forms its own batches."""

    traits = VllmV0Scheduler.traits
    config: VllmV0Config

    def __init__(self, replica_id: int, num_stages: int, config: VllmV0Config, limits: ReplicaLimits,
                 recorder: Recorder) -> None:
        if limits.num_blocks < num_stages:
            raise ConfigError(f"scheduler.num_blocks: vllm_v0 splits the {limits.num_blocks} KV blocks over "
                              f"{num_stages} virtual engines (one per pipeline stage); give it at least {num_stages}")
        share = replace(limits, num_blocks=limits.num_blocks // num_stages,
                        num_swap_blocks=limits.num_swap_blocks // num_stages)
        # an OffsetRecorder forwards every other attribute to the run's Recorder
        self.engines = [VllmV0Scheduler(replica_id, 1, config, share,
                                        cast(Recorder, OffsetRecorder(recorder, k * share.num_blocks)))
                        for k in range(num_stages)]   # before the base: the replica's pool views theirs
        super().__init__(replica_id, num_stages, config, limits, recorder)
        self.ignored: dict[int, str] = {}   # one dict for the replica
        for engine in self.engines:
            engine.ignored = self.ignored
        self._engine_of_batch: dict[int, int] = {}
        self._engine_of_request: dict[int, VllmV0Scheduler] = {}
        self._in_flight = [0] * num_stages   # requests in each engine's batch in flight

    def add_request(self, request: Request) -> None:
        engine = self._least_busy()
        self._engine_of_request[request.id] = engine
        engine.add_request(request)

    def _num_unfinished(self, k: int) -> int:
        """vLLM's get_num_unfinished_seq_groups: waiting + running (in flight too) + swapped."""
        engine = self.engines[k]
        return (len(engine.waiting) + len(engine.running) + len(engine.swapped) + self._in_flight[k]
                + len(engine.endpoint.incoming))

    def on_schedule(self) -> list[Batch]:
        """Each engine without a batch in flight takes one step."""
        batches = []
        for k, engine in enumerate(self.engines):
            if engine._num_running_batches:
                continue
            batch = engine._next_batch()
            if batch is None:
                continue
            engine._num_running_batches += 1
            batch.id, self.num_batches = self.num_batches, self.num_batches + 1
            self._engine_of_batch[batch.id] = k
            self._in_flight[k] = len(batch.requests)
            batches.append(batch)
        self._num_running_batches += len(batches)
        return batches

    def on_batch_end(self, batch: Batch) -> None:
        self._num_running_batches -= 1
        k = self._engine_of_batch.pop(batch.id)
        self._in_flight[k] = 0
        self.engines[k].on_batch_end(batch)
        for request in batch.requests:
            if request.completed:
                del self._engine_of_request[request.id]

    def _make_pool(self) -> PoolsView:
        return PoolsView([engine.pool for engine in self.engines])

    def _make_endpoint(self) -> PipelineEndpoint:
        return PipelineEndpoint(self)

    def _least_busy(self) -> VllmV0Scheduler:
        return self.engines[min(range(len(self.engines)), key=self._num_unfinished)]

    def _rejection_reason(self, num_prefill_tokens: int, num_decode_tokens: int) -> str | None:
        return self.engines[0]._rejection_reason(num_prefill_tokens, num_decode_tokens)

    def check_integrity(self, holders: list[Request] | None = None) -> None:
        for engine in self.engines:
            engine.check_integrity(None if holders is None else
                                   [r for r in holders if self._engine_of_request.get(r.id) is engine])


class PipelineEndpoint(ReplicaEndpoint):
    """The replica's engines joined as one; each request stays with the engine that holds its KV
    (a hand-off is taken over by the least busy engine)."""

    scheduler: VllmV0Pipeline

    def join(self, role: str, workload: Workload) -> None:
        super().join(role, workload)
        for engine in self.scheduler.engines:
            engine.endpoint.join(role, workload)

    @property
    def num_waiting(self) -> int:
        return sum(len(engine.waiting) for engine in self.scheduler.engines)

    @property
    def ignored(self) -> Mapping[int, str]:
        return self.scheduler.ignored

    def stuck_location(self, request: Request) -> str:
        return self._engine(request).endpoint.stuck_location(request)

    def hand_off(self, request: Request) -> None:
        self._engine(request).endpoint.hand_off(request)   # its handle still holds the engine's blocks

    def release_handoff(self, handle: KvHandle) -> None:
        self.scheduler._engine_of_request.pop(handle.id).endpoint.release_handoff(handle)

    def can_accept_transfer(self, request: Request) -> bool:
        return self.scheduler._least_busy().endpoint.can_accept_transfer(request)

    def accept_transfer(self, request: Request) -> int:
        engine = self.scheduler._least_busy()
        self.scheduler._engine_of_request[request.id] = engine
        return engine.endpoint.accept_transfer(request)   # (the engine carries this replica's id)

    def on_transfer_done(self, request: Request) -> None:
        self._engine(request).endpoint.on_transfer_done(request)

    def _engine(self, request: Request) -> VllmV0Scheduler:
        return self.scheduler._engine_of_request[request.id]
