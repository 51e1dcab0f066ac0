"""The KV-cache block pool of one replica, tracking physical block ids and their owners."""

from __future__ import annotations

from sim_core.entities import Request
from sim_core.memory.kv_pool import BlockHolder

FREE = -1


class BlockPool:
    """Fixed set of `num_blocks` physical blocks; each is free or owned by one request.

    `request.num_blocks` always counts a request's blocks; this pool also keeps their ids.

    Free blocks form a stack: the most recently freed block is reused first, and a fresh pool
    hands out ids 0, 1, 2, ... in order. A request's block table is `request.blocks`
    (physical ids in allocation order). `can_allocate` / `allocate` / `free` never raise for
    ordinary backpressure: callers ask `can_allocate` first.

    Memory grows with the blocks the run uses, not with `num_blocks` (a pool of 10^9 blocks
    serving a few requests costs a few bytes). The stack is held in two parts:

        [num_blocks - 1, ..., next_fresh]   never handed out: implicit, below everything
        _free                              freed ids, most recently freed last (the top)

    Freed ids are always pushed above the never-used ones, so this is exactly the stack a
    list of all ids would be. `_owner` covers ids [0, next_fresh) and grows as they are first
    handed out.
    """

    __slots__ = ("num_blocks", "_free", "_owner", "next_fresh", "num_holders")
    tracks_ids = True

    def __init__(self, num_blocks: int) -> None:
        assert num_blocks >= 1
        self.num_blocks = num_blocks
        self._free: list[int] = []   # freed ids; the last is reused first
        self._owner: list[int] = []  # owner id (or FREE) of each id below next_fresh
        self.next_fresh = 0          # ids >= this were never handed out
        self.num_holders = 0  # requests holding at least one block (Vidur's len(allocation_map))

    @property
    def num_free(self) -> int:
        return len(self._free) + self.num_blocks - self.next_fresh

    @property
    def num_used(self) -> int:
        return self.next_fresh - len(self._free)

    def can_allocate(self, num: int) -> bool:
        return len(self._free) + self.num_blocks - self.next_fresh >= num

    def _take(self, num: int) -> list[int]:
        """Pop `num` ids off the stack (top first), growing `_owner` for fresh ones (marked FREE:
        the caller sets the owner)."""
        free = self._free
        if len(free) >= num:   # freed ids are enough (the usual case once a run has warmed up)
            taken = free[-num:][::-1]
            del free[len(free) - num:]
            return taken
        return self._take_fresh(num)

    def _take_fresh(self, num: int) -> list[int]:
        """_take when the freed ids run out: all of them (top first), then never-used ids in order."""
        free = self._free
        start, end = self.next_fresh, self.next_fresh + num - len(free)
        assert end <= self.num_blocks, "allocating more blocks than are free"
        taken = free[::-1]
        taken.extend(range(start, end))
        free.clear()
        self._owner.extend([FREE] * (end - start))
        self.next_fresh = end
        return taken

    def allocate(self, request: Request, num: int) -> list[int]:
        """Give `num` free blocks to `request`; returns their ids (caller checked can_allocate)."""
        assert num >= 1
        free = self._free
        if len(free) >= num:
            taken = free[-num:][::-1]
            del free[len(free) - num:]
        else:
            taken = self._take_fresh(num)
        owner, rid = self._owner, request.id
        for block in taken:
            owner[block] = rid
        if not request.num_blocks:
            self.num_holders += 1
        request.blocks.extend(taken)
        request.num_blocks += num
        return taken

    def allocate_one(self, request: Request) -> int:
        """Give one free block to a request that already holds blocks (the decode fast case)."""
        try:
            block = self._free.pop()
        except IndexError:   # no freed id left: the next never-used one
            block = self._take_fresh(1)[0]
        self._owner[block] = request.id
        request.blocks.append(block)
        request.num_blocks += 1
        return block

    def allocate_each(self, requests: list[Request]) -> list[int]:
        """Give one block to each request in order (a request may appear several times)."""
        taken = self._take(len(requests)) if requests else []
        owner = self._owner
        for request, block in zip(requests, taken):
            owner[block] = request.id
            request.blocks.append(block)
            request.num_blocks += 1
        return taken

    def free(self, request: BlockHolder) -> list[int]:
        """Return all of `request`'s blocks to the pool; returns their ids."""
        blocks = request.blocks
        if blocks:
            owner = self._owner
            for block in blocks:
                owner[block] = FREE
            self._free.extend(reversed(blocks))
            self.num_holders -= 1
            request.blocks = []
            request.num_blocks = 0
        return blocks

    def owner_of(self, block: int) -> int:
        return self._owner[block] if block < self.next_fresh else FREE

    def check_integrity(self, holders: list[Request] | None = None) -> None:
        """Assert: no block both free and owned, no double allocation, used + free == total.

        With `holders` (every request that should hold blocks), also assert that their block
        tables are exactly the owned blocks.
        """
        free = self._free
        assert len(set(free)) == len(free), "a block is on the free list twice"
        assert all(0 <= b < self.next_fresh for b in free), "a never-used block is on the free list"
        assert len(self._owner) == self.next_fresh <= self.num_blocks, "owner table out of step"
        assert all(self._owner[b] == FREE for b in free), "a free block has an owner"
        owned = [b for b, o in enumerate(self._owner) if o != FREE]
        assert len(owned) + self.num_free == self.num_blocks, "used + free != total"
        if holders is not None:
            tables = [b for r in holders for b in r.blocks]
            assert sorted(tables) == owned, "block tables do not match the owned blocks"
            assert all(self._owner[b] == r.id for r in holders for b in r.blocks), "wrong owner"
            assert all(r.num_blocks == len(r.blocks) for r in holders), "block count drifted"
            assert sum(1 for r in holders if r.blocks) == self.num_holders, "holder count drifted"


class CountingBlockPool:
    """The same accounting as BlockPool without physical ids (for runs that do not record
    block allocations: decisions depend only on counts). Methods return no ids."""

    __slots__ = ("num_blocks", "num_free", "num_holders")
    tracks_ids = False

    def __init__(self, num_blocks: int) -> None:
        assert num_blocks >= 1
        self.num_blocks, self.num_free, self.num_holders = num_blocks, num_blocks, 0

    @property
    def num_used(self) -> int:
        return self.num_blocks - self.num_free

    def can_allocate(self, num: int) -> bool:
        return self.num_free >= num

    def allocate(self, request: Request, num: int) -> list[int]:
        assert self.num_free >= num >= 1
        if not request.num_blocks:
            self.num_holders += 1
        request.num_blocks += num
        self.num_free -= num
        return []

    def allocate_one(self, request: Request) -> int:
        request.num_blocks += 1
        self.num_free -= 1
        return -1

    def add(self, request: Request, num: int) -> None:
        """`num` more blocks for a request that already holds blocks."""
        request.num_blocks += num
        self.num_free -= num

    def free(self, request: BlockHolder) -> list[int]:
        if request.num_blocks:
            self.num_free += request.num_blocks
            self.num_holders -= 1
            request.num_blocks = 0
        return []

    def check_integrity(self, holders: list[Request] | None = None) -> None:
        """Assert: counts are within bounds and, with `holders`, add up to the blocks in use."""
        assert 0 <= self.num_free <= self.num_blocks, "free count out of range"
        if holders is not None:
            assert sum(r.num_blocks for r in holders) == self.num_used, "used != sum of holdings"
            assert sum(1 for r in holders if r.num_blocks) == self.num_holders, "holder count drifted"
