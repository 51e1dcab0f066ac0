"""Block pools whose blocks may be shared by the sequences of one request (parallel samples).

vLLM v0 keeps one block table per sequence; the sequences of a group (a request asking for n
samples) point at the same physical blocks for the prompt, each block carrying a reference
count. A sequence that writes into a block it shares first copies it (copy-on-write): it gets a
fresh block and the shared one loses a reference. A group is freed as a whole, so a block
returns to the free list only when its request frees it.

Invariants (checked by `check_integrity`): a block is free iff its count is 0; an owned block
has a count >= 1 equal to the number of its request's sequence tables that list it.
"""

from __future__ import annotations

from sim_core.entities import Request
from sim_core.memory.block_pool import FREE, BlockPool, CountingBlockPool
from sim_core.memory.kv_pool import BlockHolder


class RefCountedBlockPool(BlockPool):
    """BlockPool with a reference count per block (ids tracked); like the owner table, the
    counts cover only the ids handed out so far (`_grown_refs`)."""

    __slots__ = ("_refs",)

    def __init__(self, num_blocks: int) -> None:
        super().__init__(num_blocks)
        self._refs: list[int] = []

    def _grown_refs(self) -> list[int]:
        """The counts, extended with zeros to every id handed out so far (len == next_fresh)."""
        refs = self._refs
        if len(refs) < self.next_fresh:
            refs.extend([0] * (self.next_fresh - len(refs)))
        return refs

    def allocate(self, request: Request, num: int) -> list[int]:
        taken = super().allocate(request, num)
        refs = self._refs if len(self._refs) == self.next_fresh else self._grown_refs()
        for block in taken:
            refs[block] = 1
        return taken

    def allocate_one(self, request: Request) -> int:
        block = super().allocate_one(request)
        try:
            self._refs[block] = 1
        except IndexError:   # a never-used id: the counts do not cover it yet
            self._grown_refs()[block] = 1
        return block

    def allocate_each(self, requests: list[Request]) -> list[int]:
        taken = super().allocate_each(requests)
        refs = self._grown_refs()
        for block in taken:
            refs[block] = 1
        return taken

    def free(self, request: BlockHolder) -> list[int]:
        blocks = super().free(request)
        for block in blocks:
            self._refs[block] = 0
        return blocks

    def add_refs(self, blocks: list[int], count: int) -> None:
        """`count` more references to each of `blocks` (a fork shares them with new sequences)."""
        refs = self._refs
        for block in blocks:
            assert refs[block] >= 1, "only an owned block can gain references"
            refs[block] += count

    def copy_on_write(self, request: Request, block: int) -> int:
        """A sequence of `request` leaves the shared `block` for a fresh copy; returns the copy's id
        (the caller checked that a block is free)."""
        assert self._refs[block] > 1, "copy-on-write of a block nobody else references"
        self._refs[block] -= 1
        return self.allocate_one(request)

    def refs_of(self, block: int) -> int:
        return self._refs[block] if block < len(self._refs) else 0

    def check_integrity(self, holders: list[Request] | None = None,
                        tables: dict[int, list[list[int]]] | None = None) -> None:
        """BlockPool's checks, plus: a block's count is 0 iff it is free; with `tables` (request
        id -> its sequences' block tables), each count equals the tables listing the block, and
        a holder without tables references each of its blocks once."""
        super().check_integrity(holders)
        owner, refs = self._owner, self._grown_refs()
        assert len(refs) == len(owner), "reference counts out of step with the owner table"
        assert all((refs[b] == 0) == (owner[b] == FREE) for b in range(len(owner))), "refcount of a free block"
        if holders is None:
            return
        tables = tables or {}
        for request in holders:
            expected: dict[int, int] = {}
            for table in tables.get(request.id, [request.blocks]):
                for block in table:
                    expected[block] = expected.get(block, 0) + 1
            assert sorted(expected) == sorted(request.blocks), "sequence tables do not cover the blocks"
            assert all(refs[b] == count for b, count in expected.items()), "refcount != table references"


class RefCountedCountingPool(CountingBlockPool):
    """The counting pool with the same interface (no ids, so no counts to keep: decisions depend
    on how many blocks a request holds, which copy-on-write raises by one)."""

    __slots__ = ()

    def add_refs(self, blocks: list[int], count: int) -> None:
        return None

    def copy_on_write(self, request: Request, block: int) -> int:
        return self.allocate_one(request)

    def refs_of(self, block: int) -> int:
        return 0

    def check_integrity(self, holders: list[Request] | None = None,
                        tables: dict[int, list[list[int]]] | None = None) -> None:
        super().check_integrity(holders)
