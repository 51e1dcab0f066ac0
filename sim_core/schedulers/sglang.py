"""`sglang` (SGLang v0.4 scheduler): a prefill batch when one can be formed, else a decode batch.

Each iteration (`Scheduler.get_next_batch_to_run`):

1. Prefill if one can be formed (sglang_prefill.py: chunked prompt first, then the waiting
   queue through SGLang's PrefillAdder, with radix-cache hits).
2. Otherwise every running request decodes one token. When the free and evictable blocks
   cannot give each request its next block, requests are retracted (recompute, back of the
   queue): sorted by (outputs so far, -prompt length) descending, the last first, until the free
   tokens cover 20 decode steps of those left (at least one is retracted; the last one stays).
   new_token_ratio then becomes (outputs so far + 20 per request) / output budgets of those
   left; otherwise it decays from 0.7 to 0.098 over 600 decode batches (reset when idle).
3. A decode batch is padded to the next CUDA-graph batch size (cuda_graph_batch_sizes, when
   the batch is not larger than the largest); the padded size is what the GPU runs and prices.

Fast-forward (`_steady_decode`, docs/design/fast-forward.md): a decode batch that retracted
nobody re-forms unchanged, while no prompt is half done and prefill is not tried (nothing
waits, or the running batch counts as full: only a completion, a retraction or a hand-off
clears that); past completions when nothing waits, else up to the first one. new_token_ratio
is read by prefill admission and retraction only, neither of which happens inside a run, so
its decays are applied at the end.
"""

from __future__ import annotations

from functools import cached_property
from math import ceil
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field, field_validator

from sim_core.config import PolicyTraits
from sim_core.entities import Batch, Request
from sim_core.schedulers.base import UNBOUNDED
from sim_core.schedulers.cuda_graph import padded_size, padding_table
from sim_core.schedulers.engine import PrefixCachingConfig
from sim_core.schedulers.sglang_prefill import SglangPrefill
from sim_core.schedulers.sglang_retract import (
    INIT_NEW_TOKEN_RATIO,
    RETRACT_DECODE_STEPS,
    decayed,
    decayed_times,
    ratio_after_retract,
    retract_order,
)
from sim_core.schedulers.steady import SteadyDecode

if TYPE_CHECKING:
    from sim_core.config import SimulationConfig

# SGLang v0.4's default CUDA-graph capture sizes (cuda_graph_max_bs 160)
SGLANG_GRAPH_SIZES = (1, 2, 4, 8, *range(16, 161, 8))
# with requests waiting a run ends at its first completion; one ending sooner than this many
# iterations costs more to plan and apply than to step through (bench/engine_speed.py's chat)
SHORT_RUN = 8


class SglangConfig(PrefixCachingConfig):
    """The knobs sglang reads."""

    type: Literal["sglang"] = Field("sglang", description=(
        "SGLang: prefill batch else decode batch, radix prefix cache, CUDA-graph padding"))
    max_prefill_tokens: int = Field(16384, ge=1, le=10_000_000, description=(
        "sglang: prompt-token budget of one prefill batch (the first request may exceed it)."))
    chunked_prefill_size: int = Field(8192, ge=0, le=10_000_000, description=(
        "sglang: most prompt tokens in one prefill batch; a longer prompt runs in chunks over "
        "consecutive prefill batches (0 = no chunking)."))
    max_running_requests: int = Field(0, ge=0, le=1_000_000, description=(
        "sglang: request slots: most requests decoding at once (0 = SGLang's default, "
        "min(KV tokens // 2, 4096))."))
    cuda_graph_batch_sizes: list[int] = Field(default_factory=lambda: list(SGLANG_GRAPH_SIZES), max_length=512,
                                              description=(
        "sglang: decode batch sizes with a captured CUDA graph; a decode batch runs (and is priced) "
        "padded up to the next size, larger ones unpadded (empty = no CUDA graphs)."))
    enable_overlap_schedule: bool = Field(True, description=(
        "sglang: schedule the next batch and process the last one's outputs on the CPU while the "
        "GPU runs, hiding that CPU time (pipeline_parallel_size 1; the linear cost model has no "
        "CPU time)."))

    @field_validator("cuda_graph_batch_sizes")
    @classmethod
    def _graph_sizes(cls, sizes: list[int]) -> list[int]:
        if any(size < 1 or size > 65536 for size in sizes):
            raise ValueError("batch sizes must be between 1 and 65536")
        return sorted(set(sizes))

    def check_scenario(self, scenario: SimulationConfig) -> None:
        if self.chunked_prefill_size % self.block_size:
            raise ValueError(f"scheduler.chunked_prefill_size: sglang needs a multiple of block_size "
                             f"({self.block_size}, SGLang's page size) or 0; got {self.chunked_prefill_size}")
        super().check_scenario(scenario)

    def prefill_chunk(self) -> int | None:
        return self.chunked_prefill_size or None

    def overlap_schedule(self, num_stages: int) -> bool:
        return self.enable_overlap_schedule and num_stages == 1


class SglangScheduler(SglangPrefill):
    # a request over max_model_len keeps its prompt: its output is cut where it reaches the limit
    traits = PolicyTraits(SglangConfig, "SGLang (v0.4)", clips_prompts=False, has_prefix_cache=True)

    @cached_property
    def _padded_sizes(self) -> np.ndarray | None:
        """The padded size of every decode batch size up to max_running (None: no CUDA graphs)."""
        return padding_table(self.max_running, self.graph_sizes) if self.graph_sizes else None

    def _next_batch(self) -> Batch | None:
        while True:   # a decode step that retracted everyone tries the queue again at once
            retracted = self._num_preemptions
            batch = self._prefill_batch() or self._decode_batch()
            if batch is not None or self._num_preemptions == retracted:
                break
        if batch is None and not self.busy:
            self.new_token_ratio = INIT_NEW_TOKEN_RATIO   # idle
        return batch

    # ---- decode ---------------------------------------------------------------------------------

    def _decode_batch(self) -> Batch | None:
        requests = self.runnable()
        if not requests:
            return None
        needed = self._decode_blocks(requests)
        self.pool.evict_until(needed)
        if needed > self.pool.num_free_list:
            requests = self._retract(requests)
            if not requests:
                return None
        else:
            self.new_token_ratio = decayed(self.new_token_ratio)
        pool, size = self.pool, self._block_size
        for request in requests:   # _allocate_for(request, num_processed_tokens), inline (the hot loop)
            needed = -(-request.num_processed_tokens // size) - request.num_blocks
            if needed > 0:
                pool.allocate(request, needed)
        padding = padded_size(len(requests), self.graph_sizes) - len(requests)
        return self.launch(requests, [1] * len(requests), padding)

    def _decode_blocks(self, requests: list[Request]) -> int:
        """Blocks the next decode step takes: one per request whose next token starts a block."""
        size = self._block_size
        return sum(1 for r in requests if r.num_processed_tokens > size * r.num_blocks)

    def _retract(self, requests: list[Request]) -> list[Request]:
        order = retract_order(requests)
        first = True
        while first or self._free_tokens(len(order)) < RETRACT_DECODE_STEPS * len(order):
            if len(order) == 1:
                break
            first = False
            self._retract_one(order.pop())
        if self._decode_blocks(order) > self.pool.num_free:   # not even the last fits: SGLang fails here
            if self.busy:
                return []     # PP > 1: wait for the batch in flight
            self._retract_one(order.pop())
        if order:
            self.new_token_ratio = ratio_after_retract(order)
        keep = set(map(id, order))
        return [r for r in requests if id(r) in keep]

    def _free_tokens(self, num_requests: int) -> int:
        """Free-list tokens after evicting the tree toward 20 decode steps of `num_requests`."""
        self.pool.evict_until(ceil(RETRACT_DECODE_STEPS * num_requests / self._block_size))
        return self.pool.num_free_list * self._block_size

    def _retract_one(self, request: Request) -> None:
        self.requeue(request, front=False)
        self.batch_is_full = False

    # ---- fast-forward -----------------------------------------------------------------------------

    def _steady_decode(self, batch: Batch, preempted: bool) -> SteadyDecode | None:
        # The next formations skip prefill while no prompt is half done and either nothing waits
        # or the running batch is full (cleared only by a completion, a retraction or a hand-off;
        # an arrival cuts the run); the decode batch is then every running request. Growth is
        # SGLang's page allocation (a request takes a block when its next token outgrows its
        # blocks), evicting tree leaves when the free list is short: fast-forward keeps a block
        # of free + evictable spare at every formation, so nobody is retracted. A completion
        # may admit a waiting request: runs end there; with nothing waiting they go past it, the
        # policy booking it (tree insert, frees) at its instant (`_complete_in_run`).
        if preempted or batch.num_prefill_tokens or self.chunked is not None:
            return None
        if self.waiting and not self.batch_is_full:
            return None
        if self.waiting and min(r.total_tokens - r.num_processed_tokens for r in batch.requests) < SHORT_RUN:
            return None   # the run would end at a completion this close: stepping costs less
        if len(batch.requests) != len(self.running) or len(batch.requests) > self.max_running:
            return None   # PP > 1 leaves some running requests in flight (no fast-forward there)
        return self._promises[not self.waiting]

    @cached_property
    def _promises(self) -> tuple[SteadyDecode, SteadyDecode]:
        """The two promises a decode batch can get, by past_completions (the promise is frozen
        and says nothing of the batch itself: made once)."""
        def promise(past_completions: bool) -> SteadyDecode:
            return SteadyDecode(self, UNBOUNDED, past_completions=past_completions, growth="paged",
                                padded_sizes=self._padded_sizes, inbox_may_join=True,
                                on_completion=self._complete_in_run, counts_frees=False, sequential_sums=True)
        return promise(False), promise(True)

    def _complete_in_run(self, request: Request) -> None:
        """A member finished inside a fast-forwarded run: booked as its batch end would."""
        self.busy.discard(request.id)
        self._finish(request)

    def _on_steady_decode(self, first: Batch, last: Batch, num_iterations: int) -> None:
        return   # the run's completions were booked as they came (`_complete_in_run`)

    def _resume_steady(self, first: Batch, live: list[Request], num_iterations: int) -> tuple[Batch, Batch | None]:
        last, queued = super()._resume_steady(first, live, num_iterations)
        last.num_padding = padded_size(len(live), self.graph_sizes) - len(live)
        # formations 1..num_iterations-1 each decayed the ratio once (formation 0 did already)
        self.new_token_ratio = decayed_times(self.new_token_ratio, num_iterations - 1)
        return last, queued
