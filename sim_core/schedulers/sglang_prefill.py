"""SGLang's request lifecycle around the radix cache and its prefill batch (the decode side and
the choice between the two are in sglang.py).

Prefill, unless (the running batch is marked full or nobody waits) and no prompt is half done:
with fewer than max_running_requests decoding, the prompt in chunked prefill (if any) continues
first, then waiting requests in FCFS order join while `PrefillAdder` admits them (see
sglang_adder.py; a request's cached prefix comes from the radix tree, at most its prompt - 1
tokens, and is locked while it runs). A request that does not fit ends the list.

After its prefill a request's prompt joins the radix tree (its lock moves to the new node);
when it finishes, its whole sequence (minus the last token) does, and its lock is released.
A request whose prompt + output would pass max_model_len (or the KV pool less one token) is cut
there (`truncated`); a prompt that reaches it is rejected.
"""

from __future__ import annotations

from collections import deque
from itertools import chain
from math import ceil
from typing import TYPE_CHECKING

from sim_core.entities import Batch, Request, RequestStatus
from sim_core.memory.radix_cache import RadixNode
from sim_core.memory.radix_pool import RadixKvPool
from sim_core.schedulers.engine import EngineEndpoint, EngineScheduler, pool_event_recorder
from sim_core.schedulers.sglang_adder import (
    CLIP_MAX_NEW_TOKENS,
    CONTINUE,
    NO_TOKEN,
    PrefillAdder,
)
from sim_core.schedulers.sglang_retract import INIT_NEW_TOKEN_RATIO

if TYPE_CHECKING:
    from sim_core.cluster.handoff import KvHandle
    from sim_core.results.record import Recorder
    from sim_core.schedulers.base import ReplicaLimits
    from sim_core.schedulers.sglang import SglangConfig
    from sim_core.workload.model import Workload

MAX_DEFAULT_RUNNING = 4096
RESERVED_DECODE_TOKENS = 512   # SGLANG_NUM_RESERVED_DECODE_TOKENS: KV a PD decode server keeps per request


class SglangPrefill(EngineScheduler):
    """SGLang's state, admission into prefill batches, caching into the tree, finishing."""

    config: SglangConfig
    pool: RadixKvPool
    waiting: deque[Request]

    def __init__(self, replica_id: int, num_stages: int, config: SglangConfig, limits: ReplicaLimits,
                 recorder: Recorder) -> None:
        super().__init__(replica_id, num_stages, config, limits, recorder)
        cfg = self.config
        tokens = self._limits.num_blocks * self._block_size
        self.max_running = cfg.max_running_requests or max(1, min(tokens // 2, MAX_DEFAULT_RUNNING))
        self.chunk_tokens = cfg.chunked_prefill_size or None
        self.graph_sizes = cfg.cuda_graph_batch_sizes
        self.chunked: Request | None = None
        self.batch_is_full = False
        self.new_token_ratio = INIT_NEW_TOKEN_RATIO

    def _make_pool(self) -> RadixKvPool:
        return self._radix_pool(self.config.enable_prefix_caching)

    def _radix_pool(self, caching: bool) -> RadixKvPool:
        """A fresh KV pool (a radix tree when caching, else a chunk cache) reporting to the recorder."""
        return RadixKvPool(self._limits.num_blocks, self._block_size, caching,
                           pool_event_recorder(self._recorder, self.replica_id))

    @property
    def max_request_len(self) -> int:
        """SGLang's max_req_len: prompt + output fit max_model_len and, one token to spare, the
        KV pool (so that a request alone always passes admission)."""
        return min(self.max_model_len, self._limits.num_blocks * self._block_size - 1)

    def add_request(self, request: Request) -> None:
        super().add_request(request)
        self._cut_to_limit(request)

    def _cut_to_limit(self, request: Request) -> None:
        room = self.max_request_len - request.num_prefill_tokens
        if request.num_decode_tokens > room:
            request.num_decode_tokens = request.initial_decode_tokens = room
            request.truncated = True

    def _release(self, request: Request) -> None:
        self.pool.free(request)   # the pool records the blocks let go

    # ---- prefill ------------------------------------------------------------------------------

    def _prefill_batch(self) -> Batch | None:
        chunked = self.chunked
        if chunked is not None and chunked.id in self.busy:
            return None   # PP > 1: its previous chunk is in flight; one chunked prompt at a time
        if (self.batch_is_full or not self.waiting) and chunked is None:
            return None
        if len(self.running) >= self.max_running:
            self.batch_is_full = True
            return None
        adder = PrefillAdder(self.pool, self._block_size, self._running_reserve(),
                             self.config.max_prefill_tokens, self.chunk_tokens)
        requests, num_tokens = [], []
        if chunked is not None:
            remaining = chunked.num_prefill_tokens - chunked.num_processed_tokens
            tokens = adder.add_chunked(remaining, self._outputs_left(chunked))
            if tokens == remaining:
                self.chunked = None   # its last chunk
            if tokens:
                requests.append(chunked)
                num_tokens.append(tokens)
        self._add_waiting(adder, requests, num_tokens)
        for request, tokens in zip(requests, num_tokens):
            self._allocate_for(request, request.num_processed_tokens + tokens)
        return self.launch(requests, num_tokens)

    def _add_waiting(self, adder: PrefillAdder, requests: list, num_tokens: list) -> None:
        waiting = self.waiting
        while waiting:
            if len(self.running) + len(requests) >= self.max_running:
                self.batch_is_full = True
                return
            request = waiting[0]
            hits, node = self._match(request)
            extend = request.num_prefill_tokens - len(hits) * self._block_size
            tokens, state = adder.add_one(extend, request.total_tokens - request.num_known_tokens, node)
            if tokens:
                waiting.popleft()
                self._admit(request, hits, node)
                requests.append(request)
                num_tokens.append(tokens)
                if tokens < extend:
                    self.chunked = request
            if state != CONTINUE:
                self.batch_is_full = self.batch_is_full or state == NO_TOKEN
                return

    def _cached_prefix(self, request: Request) -> list[int]:
        return self._match(request)[0]

    def _match(self, request: Request) -> tuple[list[int], RadixNode]:
        if not self.caching:
            return [], self.pool.tree.root
        return self.pool.match(self.keys(request), (request.num_prefill_tokens - 1) // self._block_size)

    def _admit(self, request: Request, hits: list[int], node: RadixNode) -> None:
        self.pool.admit(request, hits, node)
        request.num_processed_tokens = len(hits) * self._block_size
        request.status = RequestStatus.RUNNING
        if self.caching:
            self.count_hit(request, request.num_processed_tokens)

    def _allocate_for(self, request: Request, num_tokens: int) -> None:
        needed = ceil(num_tokens / self._block_size) - request.num_blocks
        if needed > 0:
            self.pool.allocate(request, needed)

    def _running_reserve(self) -> float:
        """Tokens the running requests are expected to still generate (their KV to come)."""
        ratio = self.new_token_ratio   # (_outputs_left inline: once per running request and prefill try)
        return sum([min(r.total_tokens - r.num_known_tokens, CLIP_MAX_NEW_TOKENS) * ratio for r in self.running])

    @staticmethod
    def _outputs_left(request: Request) -> int:
        """max_new_tokens minus the outputs it has (a retracted request keeps its outputs)."""
        return request.total_tokens - request.num_known_tokens

    # ---- batch ends ------------------------------------------------------------------------------

    def after_batch(self, batch: Batch) -> None:
        for request in batch.requests:
            if request.completed:
                self._finish(request)
            elif batch.num_prefill_tokens and request.is_prefill_complete:
                self._cache(request, request.num_prefill_tokens)   # cache_unfinished_req
                self.running.append(request)
            elif not request.is_prefill_complete:
                self._cache(request, request.num_processed_tokens)  # a chunk

    def _finish(self, request: Request) -> None:
        self._cache(request, request.total_tokens - 1)   # cache_finished_req
        if request in self.running:
            self.running.remove(request)
        if request is self.chunked:
            self.chunked = None
        self.pool.free(request)
        self._keys.pop(request.id, None)
        self.batch_is_full = False

    def _cache(self, request: Request, num_tokens: int) -> None:
        if self.caching:
            self.pool.insert(request, self.keys(request), num_tokens)

    def _use_chunk_cache(self) -> None:
        """A PD decode server caches no prefixes: a fresh chunk-cache pool, before the run."""
        self.caching = False
        self.pool = self._radix_pool(False)

    def _make_endpoint(self) -> SglangEndpoint:
        return SglangEndpoint(self)

    def _rejection_reason(self, num_prefill_tokens: int, num_decode_tokens: int) -> str | None:
        if num_prefill_tokens >= self.max_request_len:
            return (f"its prompt of {num_prefill_tokens} tokens reaches SGLang's request limit "
                    f"{self.max_request_len} (max_model_len {self.max_model_len}, KV pool "
                    f"{self._limits.num_blocks * self._block_size} tokens minus one)")
        return None


class SglangEndpoint(EngineEndpoint):
    """SGLang's PD decode server (v0.4.6+): a chunk cache instead of the radix tree; a hand-off is
    pre-allocated its prompt's KV, FIFO, while a request slot is free and the free tokens, less
    a decode reserve for every request already running, waiting or receiving, cover its prompt
    and its own reserve. The reserve is SGLang's 512 tokens, cut to the outputs the request has
    left (a request that fits the pool alone is always taken)."""

    scheduler: SglangPrefill

    def join(self, role: str, workload: Workload) -> None:
        if role == "decode" and self.scheduler.caching:
            self.scheduler._use_chunk_cache()
        super().join(role, workload)

    def hand_off(self, request: Request) -> None:
        super().hand_off(request)
        self.scheduler.batch_is_full = False

    def release_handoff(self, handle: KvHandle) -> None:
        self.scheduler.pool.free(handle)   # the prompt stays in the prefill replica's tree, unlocked

    def expect_transfer(self, request: Request) -> None:
        self.scheduler._cut_to_limit(request)

    def can_accept_transfer(self, request: Request) -> bool:
        scheduler = self.scheduler
        if len(scheduler.running) + len(self.incoming) >= scheduler.max_running:
            return False
        others = chain(scheduler.running, scheduler.waiting, self.incoming.values())
        room = scheduler.pool.num_free * scheduler._block_size - sum(map(self._decode_reserve, others))
        return request.num_prefill_tokens + self._decode_reserve(request) <= room

    def _take_transfer(self, request: Request) -> int:
        pool = self.scheduler.pool
        pool.admit(request, [], pool.tree.root)
        self.scheduler._allocate_for(request, request.num_prefill_tokens)
        return request.num_prefill_tokens

    @staticmethod
    def _decode_reserve(request: Request) -> int:
        return min(RESERVED_DECODE_TOKENS, SglangPrefill._outputs_left(request))
