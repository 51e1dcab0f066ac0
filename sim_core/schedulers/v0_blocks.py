"""vllm_v0's block manager: GPU blocks with sharing, CPU swap space, and the checks that gate them
(vLLM v0's BlockSpaceManagerV1, the default block manager through v0.6.1).

* allocate: a prompt takes ceil(prompt / block_size) blocks; NEVER when that exceeds the pool
  minus the watermark, LATER while free - need < watermark.
* append: each live sequence needs one free block before its step (even if it needs no new
  block); a sequence whose last block is full takes a new one; one whose last block is shared
  copies it (copy-on-write) instead, except the last sequence to write, which keeps it.
* swap out: the request's distinct blocks must fit the CPU space; swap in: distinct blocks + one
  per live sequence, NEVER above the pool, LATER while free - need < watermark. Sharing is kept.

Every change of a block is recorded (allocations, frees, reference counts) and every copy is
added to the step's CacheOps.
"""

from __future__ import annotations

from enum import Enum
from math import ceil
from typing import TYPE_CHECKING

from sim_core.entities import Request, RequestStatus
from sim_core.memory.cache_ops import COPY, SWAP_IN, SWAP_OUT, CacheOps
from sim_core.memory.shared_blocks import RefCountedBlockPool, RefCountedCountingPool
from sim_core.memory.swap_space import SwapSpace
from sim_core.schedulers.seq_group import SeqGroup

if TYPE_CHECKING:
    from sim_core.results.record import Recorder


class AllocStatus(Enum):
    OK = "ok"
    LATER = "later"
    NEVER = "never"


class V0BlockManager:
    """Accounting for one replica; the scheduler decides, this class checks and books."""

    def __init__(self, pool: RefCountedBlockPool | RefCountedCountingPool, swap: SwapSpace, block_size: int,
                 watermark_blocks: int, recorder: Recorder, replica_id: int) -> None:
        self.pool, self.swap, self.block_size, self.watermark = pool, swap, block_size, watermark_blocks
        self.recorder, self.replica_id = recorder, replica_id
        self.groups: dict[int, SeqGroup] = {}  # requests with n > 1

    def live_seqs(self, request: Request) -> int:
        group = self.groups.get(request.id)
        return group.num_seqs if group is not None and group.forked else 1

    def _status(self, need: int, watermark: int) -> AllocStatus:
        if self.pool.num_blocks - need < watermark:
            return AllocStatus.NEVER
        return AllocStatus.OK if self.pool.num_free - need >= watermark else AllocStatus.LATER

    # ---- prompts ---------------------------------------------------------------------------

    def prompt_blocks(self, request: Request) -> int:
        return ceil(request.num_prefill_tokens / self.block_size)

    def can_allocate(self, request: Request) -> AllocStatus:
        return self._status(self.prompt_blocks(request), self.watermark)

    def allocate(self, request: Request) -> None:
        """The whole prompt's blocks (checked by can_allocate)."""
        request.status = RequestStatus.RUNNING
        blocks = self.pool.allocate(request, self.prompt_blocks(request))
        self.recorder.on_allocate(self.replica_id, request.id, blocks)

    def fork(self, request: Request) -> None:
        """The prompt is prefilled and n sequences exist: all of them share its blocks."""
        group = self.groups[request.id]
        group.forked, group.num_shared = True, request.num_blocks
        group.seq_blocks = request.num_blocks
        self.pool.add_refs(request.blocks, group.num_seqs - 1)
        if self.pool.tracks_ids:
            group.tables = [list(request.blocks) for _ in range(group.num_seqs)]
            self.recorder.on_refs(self.replica_id, request.blocks, group.num_seqs)

    # ---- decode steps ------------------------------------------------------------------------

    def can_append(self, request: Request) -> bool:
        return self.live_seqs(request) <= self.pool.num_free

    def append(self, request: Request, ops: CacheOps) -> None:
        """Room for this step's token of every live sequence (checked by can_append). Prompt
        chunks need nothing: admission allocated the whole prompt."""
        if not request.is_prefill_complete:
            return
        group = self.groups.get(request.id)
        if group is None or not group.forked:
            if request.num_processed_tokens > self.block_size * request.num_blocks:
                self.recorder.on_allocate_one(self.replica_id, request.id, self.pool.allocate_one(request))
            return
        # the tokens in each table before this step: processed - 1 (the newest is written now)
        if request.num_processed_tokens - 1 == self.block_size * group.seq_blocks:
            self._grow_each(request, group)
        elif group.num_shared == group.seq_blocks:
            self._copy_on_write(request, group, ops)

    def _grow_each(self, request: Request, group: SeqGroup) -> None:
        """Every sequence's last block is full: one new block each."""
        for seq in range(group.num_seqs):
            block = self.pool.allocate_one(request)
            self.recorder.on_allocate_one(self.replica_id, request.id, block)
            if group.tables is not None:
                group.tables[seq].append(block)
        group.seq_blocks += 1

    def _copy_on_write(self, request: Request, group: SeqGroup, ops: CacheOps) -> None:
        """The shared last block is partly filled: sequences 0..n-2 copy it, the last keeps it."""
        last = group.tables[0][-1] if group.tables is not None else -1
        for seq in range(group.num_seqs - 1):
            block = self.pool.copy_on_write(request, last)
            self.recorder.on_allocate_one(self.replica_id, request.id, block)
            if group.tables is not None:
                group.tables[seq][-1] = block
        group.num_shared -= 1
        ops.add(COPY, request.id, group.num_seqs - 1)
        if group.tables is not None:
            self.recorder.on_refs(self.replica_id, [last], 1)

    # ---- freeing and swapping ----------------------------------------------------------------

    def free(self, request: Request) -> int:
        """Free all of the request's GPU blocks (its layout is kept for a swap-in); returns how
        many distinct blocks it held."""
        group = self.groups.get(request.id)
        if group is not None and group.tables is not None and group.num_shared:
            self.recorder.on_refs(self.replica_id, group.tables[0][: group.num_shared], 0)
        num = request.num_blocks
        self.recorder.on_free(self.replica_id, request.id, self.pool.free(request))
        return num

    def can_swap_out(self, request: Request) -> bool:
        return self.swap.can_swap_out(request.num_blocks)

    def swap_out(self, request: Request, ops: CacheOps) -> None:
        num = self.free(request)
        self.swap.swap_out(request.id, num)
        ops.add(SWAP_OUT, request.id, num)

    def swap_in_need(self, request: Request) -> int:
        """GPU blocks a swap-in must find: the swapped blocks plus one per live sequence for the
        token it writes right after (vLLM's conservative count)."""
        return self.swap.held[request.id] + self.live_seqs(request)

    def can_swap_in(self, request: Request) -> AllocStatus:
        need = self.swap_in_need(request)
        if self.pool.num_blocks < need:
            return AllocStatus.NEVER
        return AllocStatus.OK if self.pool.num_free - need >= self.watermark else AllocStatus.LATER

    def swap_in(self, request: Request, ops: CacheOps) -> None:
        num = self.swap.release(request.id)
        request.status = RequestStatus.RUNNING
        blocks = self.pool.allocate(request, num)
        self.recorder.on_allocate(self.replica_id, request.id, blocks)
        ops.add(SWAP_IN, request.id, num)
        group = self.groups.get(request.id)
        if group is None or not group.forked:
            return
        assert group.num_distinct == num, "a group's layout drifted while swapped"
        self.pool.add_refs(request.blocks[: group.num_shared], group.num_seqs - 1)
        if self.pool.tracks_ids:
            group.rebuild_tables(blocks)
            self.recorder.on_refs(self.replica_id, blocks[: group.num_shared], group.num_seqs)

    def check_integrity(self, holders: list[Request] | None = None) -> None:
        """Pool (with every forked group's tables), swap space, and each group's layout."""
        tables = {rid: g.tables for rid, g in self.groups.items() if g.forked and g.tables is not None}
        self.pool.check_integrity(holders, tables)
        self.swap.check_integrity()
        for request in holders or []:
            group = self.groups.get(request.id)
            if group is not None and group.forked:
                assert group.num_distinct == request.num_blocks, "group layout != blocks held"
