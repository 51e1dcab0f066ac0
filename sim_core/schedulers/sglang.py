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
"""

from __future__ import annotations

from math import ceil

from sim_core.entities import Batch, Request
from sim_core.schedulers.cuda_graph import padded_size
from sim_core.schedulers.sglang_prefill import SglangPrefill
from sim_core.schedulers.sglang_retract import (
    INIT_NEW_TOKEN_RATIO,
    RETRACT_DECODE_STEPS,
    decayed,
    ratio_after_retract,
    retract_order,
)


class SglangScheduler(SglangPrefill):
    label = "SGLang (v0.4)"

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
        for request in requests:
            self._allocate_for(request, request.num_processed_tokens)
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
