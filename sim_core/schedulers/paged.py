"""Paged KV allocation shared by vllm and sarathi (Vidur's rules, written once).

A new request must fit its whole prompt, ceil(P / block_size) blocks, while leaving the
watermark free; a request that already holds blocks only needs one free block in the pool
(even when it needs no new block) and takes one more block when its processed tokens outgrow
the blocks it holds.
"""

from __future__ import annotations

from functools import cached_property
from math import ceil
from typing import TYPE_CHECKING

from sim_core.config import SchedulerConfig
from sim_core.config.scheduler import WatermarkFraction
from sim_core.entities import Request
from sim_core.memory import BlockPool, CountingBlockPool
from sim_core.schedulers.base import UNBOUNDED, ReplicaScheduler
from sim_core.schedulers.endpoint import ReplicaEndpoint
from sim_core.schedulers.steady import SteadyDecode

if TYPE_CHECKING:
    from sim_core.results.record import Recorder
    from sim_core.schedulers.base import ReplicaLimits


class PagedConfig(SchedulerConfig):
    """Knobs of the paged policies (vllm, sarathi) besides their own."""

    watermark_blocks_fraction: WatermarkFraction


class PagedScheduler(ReplicaScheduler):
    """Base of vllm and sarathi: watermark admission, one-block growth (in take_decodes, the
    only place requests grow), LIFO restarts."""

    config: PagedConfig
    pool: BlockPool | CountingBlockPool
    running: list[Request]

    def __init__(self, replica_id: int, num_stages: int, config: PagedConfig, limits: ReplicaLimits,
                 recorder: Recorder) -> None:
        super().__init__(replica_id, num_stages, config, limits, recorder)
        self.watermark_blocks = int(self.config.watermark_blocks_fraction * self._limits.num_blocks)

    def prompt_blocks(self, request: Request) -> int:
        return ceil(request.num_prefill_tokens / self._block_size)

    def can_admit(self, request: Request) -> bool:
        return self.pool.num_free - self.prompt_blocks(request) >= self.watermark_blocks

    def admit(self, request: Request) -> None:
        self._allocate(request, self.prompt_blocks(request))

    @cached_property
    def _steady_promises(self) -> tuple[SteadyDecode, SteadyDecode]:
        """vllm's and sarathi's two promises for a steady decode batch, by past_completions
        (frozen, and nothing in them depends on the batch: made once, not at every formation)."""
        def promise(past_completions: bool) -> SteadyDecode:
            return SteadyDecode(self, UNBOUNDED, past_completions=past_completions, growth="paged", ends_in_bulk=True)
        return promise(False), promise(True)

    def _make_endpoint(self) -> PagedEndpoint:
        return PagedEndpoint(self)

    def take_decodes(self, order: list[Request], limit: int) -> tuple[list[Request], list[Request], list[Request]]:
        """Walk `order` taking decoding requests (1 token each) while fewer than `limit` are
        taken; when the pool has no free block, restart the last request still in `order`
        (the victim), or the candidate itself when none is left.

        Returns (taken, partial_prefills, remaining): requests whose prompt is incomplete are
        set aside in order; `remaining` are those not reached (victims removed).
        """
        taken: list[Request] = []
        partial: list[Request] = []
        i, end = 0, len(order)
        pool, size = self.pool, self._block_size
        record, replica = self._recorder.on_allocate_one, self.replica_id
        free = pool.num_free
        request: Request | None   # None once the candidate restarted itself
        if end <= limit and end <= free:   # all are taken, each with at most one block: none restarts
            for request in order:
                if not request.is_prefill_complete:
                    partial.append(request)
                elif request.num_processed_tokens > size * request.num_blocks:  # grow by one block
                    record(replica, request.id, pool.allocate_one(request))
                    taken.append(request)
                else:
                    taken.append(request)
            return taken, partial, []
        num_taken = 0   # len(taken)
        while i < end and num_taken < limit:
            request = order[i]
            i += 1
            if not request.is_prefill_complete:
                partial.append(request)
                continue
            if not free:
                while not pool.num_free:
                    if end > i:
                        end -= 1
                        self._restart(order[end])
                    else:
                        self._restart(request)
                        request = None
                        break
                free = pool.num_free
                if request is None:
                    continue
            if request.num_processed_tokens > size * request.num_blocks:  # grow by one block
                record(replica, request.id, pool.allocate_one(request))
                free -= 1
            taken.append(request)
            num_taken += 1
        return taken, partial, order[i:end]

    def _rejection_reason(self, num_prefill_tokens: int, num_decode_tokens: int) -> str | None:
        blocks, usable = ceil(num_prefill_tokens / self._block_size), self._limits.num_blocks - self.watermark_blocks
        if blocks > usable:
            return (f"its prompt needs {blocks} KV blocks but at most {usable} can be admitted "
                    f"({self._limits.num_blocks} blocks minus a watermark of {self.watermark_blocks})")
        peak = ceil(max(num_prefill_tokens, num_prefill_tokens + num_decode_tokens - 2) / self._block_size)
        if num_decode_tokens >= 2 and peak > self._limits.num_blocks - 1:
            return (f"it grows to {peak} KV blocks while decoding and a decode step needs one more "
                    f"free block, but the replica has {self._limits.num_blocks}")
        return None


class PagedEndpoint(ReplicaEndpoint):
    """A handed-off request is admitted like a new one (prompt blocks above the watermark)."""

    scheduler: PagedScheduler

    def can_accept_transfer(self, request: Request) -> bool:
        scheduler = self.scheduler
        return scheduler.pool.num_holders < scheduler.config.batch_size_cap and scheduler.can_admit(request)
