"""SGLang's PrefillAdder: which waiting requests join a prefill batch, in tokens.

Three budgets (v0.4 `schedule_policy.PrefillAdder`):
* total: KV tokens free or evictable, minus what running requests are expected to still
  generate (each min(outputs left, 4096) x new_token_ratio) and, per request added, its prompt
  tokens to compute (rounded up to whole blocks) plus min(outputs left, 4096) (outputs left:
  max_new_tokens less the outputs a retracted request already has, as SGLang counts since
  late v0.4; counting them twice could keep a retracted request out forever);
* input: max_prefill_tokens of prompt tokens (the first request may exceed it);
* chunk: chunked_prefill_size; a prompt longer than what is left of it runs its first
  block-aligned chunk now, and its remainder continues in the next prefill batches.
Prompt tokens are billed in whole blocks (late v0.4 `_update_prefill_budget` rounds every
extend up to pages, the last chunk of a chunked prompt included), so what the adder admits
always finds its blocks.
A request that does not fit ends the batch (no skipping ahead): NO_TOKEN when memory is short
(the running batch then counts as full until a request leaves it), OTHER for the other budgets.
"""

from __future__ import annotations

from math import ceil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim_core.memory.radix_cache import RadixNode
    from sim_core.memory.radix_pool import RadixKvPool

CONTINUE, NO_TOKEN, OTHER = "continue", "no_token", "other"
CLIP_MAX_NEW_TOKENS = 4096


class PrefillAdder:
    """Budgets of one prefill batch; the pool's free + evictable blocks are read live (locking
    a matched prefix makes it unevictable)."""

    def __init__(self, pool: RadixKvPool, block_size: int, running_reserve: float, max_prefill_tokens: int,
                 chunk_tokens: int | None) -> None:
        self.pool, self.block_size = pool, block_size
        self.offset = running_reserve
        self.cur_rem = pool.num_free * block_size
        self.rem_input = max_prefill_tokens
        self.rem_chunk = chunk_tokens
        self.num_added = 0

    @property
    def rem_total(self) -> float:
        return self.pool.num_free * self.block_size - self.offset

    def _reserve(self, input_tokens: int, max_new_tokens: int) -> None:
        self.offset += input_tokens + max_new_tokens
        self.cur_rem -= input_tokens
        self.rem_input -= input_tokens
        if self.rem_chunk is not None:
            self.rem_chunk -= input_tokens
        self.num_added += 1

    def state(self) -> str:
        if self.rem_total <= 0 or self.cur_rem <= 0:
            return NO_TOKEN
        if self.rem_input <= 0 or (self.rem_chunk is not None and self.rem_chunk <= 0):
            return OTHER
        return CONTINUE

    def add_chunked(self, remaining: int, max_new_tokens: int) -> int:
        """The next chunk of the request already in chunked prefill: tokens to run now, at most
        what free memory holds (SGLang assumes it fits). Billed in whole blocks, as every
        admission is: its last chunk may be one token, and that token takes a block."""
        room = self.pool.num_free * self.block_size
        tokens = min(remaining, self.rem_chunk if self.rem_chunk is not None else remaining, room)
        finishing = tokens == remaining
        self._reserve(self._paged(tokens), min(max_new_tokens, CLIP_MAX_NEW_TOKENS) if finishing else 0)
        return tokens

    def _paged(self, tokens: int) -> int:
        """`tokens` rounded up to whole blocks (SGLang's `ceil_paged_tokens`)."""
        return ceil(tokens / self.block_size) * self.block_size

    def add_one(self, extend: int, max_new_tokens: int, node: RadixNode) -> tuple[int, str]:
        """Try a waiting request with `extend` prompt tokens to compute (after its cached
        prefix, the tree path to `node`, which is locked while the request is tried and stays
        locked when it is added). Returns (tokens it runs now, 0 if not added; the batch's
        state after it)."""
        total = extend + min(max_new_tokens, CLIP_MAX_NEW_TOKENS)
        input_tokens = self._paged(extend)
        if total >= self.rem_total:
            return 0, NO_TOKEN
        if input_tokens > self.rem_input and self.num_added:
            return 0, OTHER
        pool = self.pool
        pool.lock(node)
        if total > self.rem_total:
            pool.unlock(node)
            return 0, NO_TOKEN
        if self.rem_chunk is None or input_tokens <= self.rem_chunk:
            self._reserve(input_tokens, min(max_new_tokens, CLIP_MAX_NEW_TOKENS))
            return extend, self.state()
        chunk = self.rem_chunk // self.block_size * self.block_size
        if chunk <= 0:
            pool.unlock(node)
            return 0, OTHER
        self._reserve(chunk, 0)
        return chunk, self.state()
