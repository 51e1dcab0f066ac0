"""What the engine-era schedulers (vllm_v1, sglang) share on top of the base.

`running` holds every admitted request in admission order, including those in a batch now
(their ids are in `busy`): the engines keep one running list and never reorder it. Preemption
is the engines' recompute: the prompt and the outputs so far become the new prompt
(`Request.recompute`). With prefix caching on, a request's block keys come from the workload's
prefix columns (`memory/prefix_keys.py`), computed once while it is alive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from sim_core.config import SchedulerConfig
from sim_core.entities import Batch, Request, RequestStatus
from sim_core.memory.prefix_keys import PrefixKeys
from sim_core.schedulers.base import ReplicaScheduler
from sim_core.schedulers.endpoint import ReplicaEndpoint

if TYPE_CHECKING:
    from sim_core.results.record import Recorder
    from sim_core.schedulers.base import ReplicaLimits
    from sim_core.workload.model import Workload


class PrefixCachingConfig(SchedulerConfig):
    """The knob both engines (vllm_v1, sglang) read besides their own."""

    enable_prefix_caching: bool = Field(True, description=(
        "vllm_v1/sglang: reuse the KV blocks of an identical prompt prefix (vllm_v1: hashed full "
        "blocks kept after they are freed; sglang: a radix tree); cached tokens are not computed."))

    def prefix_caching(self) -> bool:
        return self.enable_prefix_caching


class EngineScheduler(ReplicaScheduler):
    """Base of vllm_v1 and sglang: ordered running list, busy set, keys, hit accounting."""

    config: PrefixCachingConfig

    def __init__(self, replica_id: int, num_stages: int, config: PrefixCachingConfig, limits: ReplicaLimits,
                 recorder: Recorder) -> None:
        super().__init__(replica_id, num_stages, config, limits, recorder)
        self.busy: set[int] = set()
        self.caching = self.config.enable_prefix_caching
        self.prefix: PrefixKeys | None = None
        self._keys: dict[int, list[int]] = {}
        self._priority: np.ndarray | None = None
        self.max_model_len = 0

    def _attach_workload(self, workload: Workload) -> None:
        self._priority = workload.priority
        self.max_model_len = self._limits.max_model_len
        if self.caching:
            self.prefix = PrefixKeys(workload, self._block_size)

    def add_request(self, request: Request) -> None:
        if self._priority is not None:
            request.priority = int(self._priority[request.id])
        super().add_request(request)

    # ---- helpers for the policies -----------------------------------------------------------

    def keys(self, request: Request) -> list[int]:
        """Block keys of the request's token stream (prefix caching on)."""
        keys = self._keys.get(request.id)
        if keys is None:
            assert self.prefix is not None, "keys are asked for only with prefix caching on"
            keys = self._keys[request.id] = self.prefix.block_keys(request.id)
        return keys

    def _cached_prefix(self, request: Request) -> list[int]:
        """Blocks of the longest cached prefix of the request's prompt, but its last token (prefix
        caching on; locks and changes nothing but the request's memoised keys)."""
        return []

    @staticmethod
    def kv_tokens(request: Request) -> int:
        """Tokens whose KV is computed: while decoding, the newest output token is not yet."""
        return request.num_processed_tokens - 1 if request.is_prefill_complete else request.num_processed_tokens

    def runnable(self) -> list[Request]:
        """Running requests not in a batch now, in running order."""
        busy = self.busy
        return [r for r in self.running if r.id not in busy] if busy else list(self.running)

    def launch(self, requests: list[Request], num_tokens: list[int], num_padding: int = 0) -> Batch | None:
        batch = self._make_batch(requests, num_tokens)
        if batch is not None:
            batch.num_padding = num_padding
            self.busy.update(r.id for r in requests)
        return batch

    @staticmethod
    def count_hit(request: Request, cached_tokens: int) -> None:
        """Hit accounting (per admission): cached tokens are not scheduled but are part of the
        prompt (and of prompt throughput)."""
        request.num_cached_tokens += cached_tokens
        request.num_lookup_tokens += request.num_prefill_tokens

    def requeue(self, request: Request, front: bool) -> None:
        """Recompute preemption: free the request's blocks and queue it again (at the front,
        or at the back). A request admitted in the step being formed, which never ran, is simply
        taken back (no restart, its cache lookup undone)."""
        self.running.remove(request)
        self._release(request)
        if request.scheduled:
            request.recompute()
            self._num_preemptions += 1
            self._recorder.on_restart(self.replica_id, request.id)
        else:
            if self.caching:
                request.num_cached_tokens -= request.num_processed_tokens
                request.num_lookup_tokens -= request.num_prefill_tokens
            request.num_processed_tokens = 0
        request.status = RequestStatus.WAITING
        if front:
            self.waiting.appendleft(request)
        else:
            self.waiting.append(request)

    def finish(self, request: Request) -> None:
        self.running.remove(request)
        self._release(request)
        self._keys.pop(request.id, None)

    # ---- lifecycle ---------------------------------------------------------------------------

    def on_batch_end(self, batch: Batch) -> None:
        self._num_running_batches -= 1
        busy = self.busy
        if busy:   # (empty with vllm_v1's async steps, which track their batches in flight instead)
            for request in batch.requests:
                busy.discard(request.id)
        self.after_batch(batch)

    def after_batch(self, batch: Batch) -> None:
        for request in batch.requests:
            if request.completed:
                self.finish(request)

    def _on_steady_decode(self, first: Batch, last: Batch, num_iterations: int) -> None:
        # fast-forward freed the blocks of members that finished inside the run
        for request in first.requests:
            if request.completed and request not in last.requests:
                self.running.remove(request)
                self.busy.discard(request.id)
                self._keys.pop(request.id, None)

    def _make_endpoint(self) -> EngineEndpoint:
        return EngineEndpoint(self)


class EngineEndpoint(ReplicaEndpoint):
    """P/D for the engines: a hand-off forgets the request's block keys too; a request whose KV
    has arrived joins the tail of running, as an admission would."""

    scheduler: EngineScheduler

    def num_cached_blocks(self, request: Request) -> int:
        scheduler = self.scheduler
        if not scheduler.caching:
            return 0
        known = request.id in scheduler._keys
        hits = len(scheduler._cached_prefix(request))
        if not known:
            del scheduler._keys[request.id]   # a request routed elsewhere keeps no keys here
        return hits

    def hand_off(self, request: Request) -> None:
        super().hand_off(request)
        self.scheduler._keys.pop(request.id, None)

    def on_transfer_done(self, request: Request) -> None:
        super().on_transfer_done(request)
        request.status = RequestStatus.RUNNING


def pool_event_recorder(recorder: Recorder, replica: int) -> Callable[[int, list[int], int], None] | None:
    """The `on_event(request, blocks, delta)` a pool reports to: +1/-1 a request takes/lets go of
    blocks, +2/-2 blocks get/lose a prefix-cache key; None when the record level keeps no block
    events (the pool then calls nothing)."""
    if not recorder.keeps_blocks:
        return None
    def record(request: int, blocks: list[int], delta: int) -> None:
        if delta == 1:
            recorder.on_allocate(replica, request, blocks)
        elif delta == -1:
            recorder.on_free(replica, request, blocks)
        else:
            recorder.on_cache(replica, blocks, delta)
    return record
