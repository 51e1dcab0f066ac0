"""`vllm` (Vidur's vLLM v0 model): prefill-only batches first, else a decode batch.

1. From the head of the waiting queue, admit requests while the prompt's blocks fit above the
   watermark, (batch size + 1) x longest prompt <= max_tokens_in_batch, fewer than
   batch_size_cap requests hold memory, and the batch has fewer than batch_size_cap // PP
   requests. Each runs its whole prompt. A non-empty prefill batch is returned as is.
2. Otherwise the running requests, sorted by arrival, decode one token each (up to
   batch_size_cap // PP); when the pool has no free block the latest-arrived remaining request
   is restarted (or the candidate itself when none remains).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sim_core.config import PolicyTraits
from sim_core.config.scheduler import MaxTokensInBatch
from sim_core.entities import Batch, Request
from sim_core.schedulers.base import arrival_time
from sim_core.schedulers.paged import PagedConfig, PagedScheduler
from sim_core.schedulers.steady import SteadyDecode


class VllmConfig(PagedConfig):
    """The knobs vllm reads."""

    type: Literal["vllm"] = Field("vllm", description=(
        "prefill-first continuous batching, paged KV, as Vidur models it"))
    max_tokens_in_batch: MaxTokensInBatch

    def activation_tokens(self, max_model_len: int) -> int:
        return self.max_tokens_in_batch


class VllmScheduler(PagedScheduler):
    traits = PolicyTraits(VllmConfig, "vLLM v0 as modelled by Vidur", memory_planner="vidur")
    config: VllmConfig

    def _next_batch(self) -> Batch | None:
        return self._prefill_batch() or self._decode_batch()

    def _prefill_batch(self) -> Batch | None:
        if not self.waiting:   # (most formations: nothing to admit)
            return None
        requests: list[Request] = []
        num_tokens: list[int] = []
        longest = 0
        waiting, cap = self.waiting, self.config.batch_size_cap
        while waiting:
            request = waiting[0]
            tokens = self._next_num_tokens(request)
            if not self.can_admit(request):
                break
            if (len(num_tokens) + 1) * max(longest, tokens) > self.config.max_tokens_in_batch:
                break
            if self.pool.num_holders == cap or len(requests) == self._micro_batch_cap:
                break
            waiting.popleft()
            self.admit(request)
            requests.append(request)
            num_tokens.append(tokens)
            longest = max(longest, tokens)
        return self._make_batch(requests, num_tokens, sum(num_tokens))

    def _decode_batch(self) -> Batch | None:
        self.running.sort(key=arrival_time)
        taken, partial, remaining = self.take_decodes(self.running, self._micro_batch_cap)
        assert not partial, "vllm never leaves a prompt half done"
        self.running = remaining
        return self._make_batch(taken, [1] * len(taken), 0)

    def _steady_decode(self, batch: Batch, preempted: bool) -> SteadyDecode | None:
        # The prefill path already failed for the queue head and only gets less memory while
        # decoding; the decode batch is the first micro_batch_cap running requests by arrival,
        # the same set every time unless a tie in arrival time lets a leftover overtake.
        if preempted or batch.num_prefill_tokens:
            return None
        # `_decode_batch` just sorted `running` by arrival and split it into the batch and the
        # leftovers, both still in that order: the earliest leftover and the latest member are
        # at their ends
        if self.running and self.running[0].arrived_at <= batch.requests[-1].arrived_at:
            return None
        return self._steady_promises[not self.waiting and not self.running]

    def _rejection_reason(self, num_prefill_tokens: int, num_decode_tokens: int) -> str | None:
        if num_prefill_tokens > self.config.max_tokens_in_batch:
            return (f"its prompt of {num_prefill_tokens} tokens exceeds max_tokens_in_batch "
                    f"{self.config.max_tokens_in_batch} (vllm runs whole prompts)")
        return super()._rejection_reason(num_prefill_tokens, num_decode_tokens)
