"""`sarathi` (Sarathi-Serve as modelled by Vidur): decodes and prefill chunks share a batch.

1. Walk the running requests in list order (the leftovers of the last formation, kept sorted by
   arrival, then the requests returned by batches since, in batch order) until the batch has
   batch_size_cap // PP requests: prompts still in progress are set aside; decodes join with
   one token after the paged block rule (restart the last remaining request when no block is
   free).
2. Set-aside prompts get min(remaining prompt, chunk_size - tokens in batch) tokens; one that
   would get 0 is skipped (it keeps its blocks and waits).
3. The running requests not taken are re-sorted by arrival.
4. New requests join from the waiting queue while fewer than batch_size_cap hold memory, the
   batch is under batch_size_cap // PP, the whole prompt fits above the watermark, and the
   chunk budget leaves them at least one token.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sim_core.config import PolicyTraits
from sim_core.entities import Batch
from sim_core.schedulers.base import arrival_time
from sim_core.schedulers.paged import PagedConfig, PagedScheduler
from sim_core.schedulers.steady import SteadyDecode


class SarathiConfig(PagedConfig):
    """The knobs sarathi reads."""

    type: Literal["sarathi"] = Field("sarathi", description=(
        "chunked prefill mixed with decodes, as Vidur models it"))
    chunk_size: int = Field(512, ge=1, le=10_000_000, description=(
        "sarathi: token budget of one iteration shared by decodes and prefill chunks."))

    def activation_tokens(self, max_model_len: int) -> int:
        return self.chunk_size + self.batch_size_cap

    def prefill_chunk(self) -> int | None:
        return self.chunk_size


class SarathiScheduler(PagedScheduler):
    traits = PolicyTraits(SarathiConfig, "Sarathi-Serve as modelled by Vidur", memory_planner="vidur")
    config: SarathiConfig

    def _next_batch(self) -> Batch | None:
        chunk = self.config.chunk_size
        requests, partial, remaining = self.take_decodes(self.running, self._micro_batch_cap)
        num_tokens = [1] * len(requests)
        decodes = budget_used = len(requests)
        skipped = []
        for request in partial:
            tokens = min(request.num_prefill_tokens - request.num_processed_tokens, chunk - budget_used)
            if tokens <= 0:
                skipped.append(request)
                continue
            budget_used += tokens
            requests.append(request)
            num_tokens.append(tokens)
        self.running = sorted(skipped + remaining, key=arrival_time)
        budget_used = self._admit_new(requests, num_tokens, budget_used)
        return self._make_batch(requests, num_tokens, budget_used - decodes)

    def _steady_decode(self, batch: Batch, preempted: bool) -> SteadyDecode | None:
        # Steady when every running request decodes in this batch (no prompt chunks, no
        # leftovers to rotate in) and admission of new requests is blocked by memory or caps.
        if preempted or batch.num_prefill_tokens or self.running:
            return None
        return self._steady_promises[not self.waiting]

    def _admit_new(self, requests: list, num_tokens: list, budget_used: int) -> int:
        """Admit new requests' first chunks; returns the tokens used of the chunk budget."""
        waiting, chunk = self.waiting, self.config.chunk_size
        while waiting:
            if self.pool.num_holders == self.config.batch_size_cap or len(requests) == self._micro_batch_cap:
                break
            request = waiting[0]
            if not self.can_admit(request):
                break
            tokens = min(request.num_prefill_tokens - request.num_processed_tokens, chunk - budget_used)
            if tokens <= 0:
                break
            waiting.popleft()
            self.admit(request)
            budget_used += tokens
            requests.append(request)
            num_tokens.append(tokens)
        return budget_used
