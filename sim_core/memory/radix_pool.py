"""SGLang's KV memory: a free list of blocks (pages) and a radix tree of cached prefixes.

Every block is in exactly one place: the free list, the tree, or private to one request. A
request's table is `request.blocks`:

    [0, tree_len)            blocks of the tree path it has locked (its cached prefix)
    [tree_len, num_blocks)   its private blocks (computed by it, not in the tree yet)

The free list hands out its front and takes freed blocks at the back (a fresh pool gives 0, 1,
2, ...). When it runs short, unlocked tree leaves are evicted (LRU) onto its back first. With
caching off the tree stays empty and a request's blocks are all private (SGLang's ChunkCache).

Memory grows with the blocks the run uses, not with `num_blocks`. The free list is held in two
parts:

    [next_fresh, num_blocks)   never handed out: implicit, at the front, in id order
    _free                      blocks freed or evicted since, front first

Returned blocks always join behind the never-used ones, so this is exactly the list a fresh
pool of all ids would become. `_place` covers ids [0, next_fresh).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from sim_core.entities import Request
from sim_core.memory.kv_pool import BlockHolder
from sim_core.memory.radix_cache import RadixCache, RadixNode

FREE = -1
IN_TREE = -2


class RadixKvPool:
    """`num_blocks` KV blocks shared by requests and the radix tree.

    `on_event(request_id, blocks, delta)` is told of every change a KV map draws: a request takes
    (+1) or lets go of (-1) blocks, blocks get (+2) or lose (-2) a cache key (request -1).
    """

    tracks_ids = True

    def __init__(self, num_blocks: int, block_size: int, caching: bool,
                 on_event: Callable[[int, list[int], int], None] | None = None) -> None:
        assert num_blocks >= 1
        self.num_blocks, self.block_size, self.caching = num_blocks, block_size, caching
        self.tree = RadixCache()
        self._free: deque[int] = deque()           # returned blocks, front first
        self.next_fresh = 0                        # ids >= this were never handed out
        self._place: list[int] = []                # below next_fresh: FREE, IN_TREE, or the private owner
        self._node: dict[int, RadixNode] = {}      # request id -> the tree node it has locked
        self._tree_len: dict[int, int] = {}        # request id -> leading table blocks from the tree
        self.num_holders = 0
        self._event = on_event or (lambda request, blocks, delta: None)
        self._records = on_event is not None   # (the per-block loops skip the call when nobody listens)

    # (num_free and num_used read the fields directly: they are asked tens of thousands of times a run)
    @property
    def num_free(self) -> int:
        """Blocks that can be handed out now: free, or evictable from the tree."""
        return len(self._free) + self.num_blocks - self.next_fresh + self.tree.evictable_size

    @property
    def num_used(self) -> int:
        return self.next_fresh - len(self._free) - self.tree.evictable_size

    @property
    def num_free_list(self) -> int:
        """Blocks on the free list (without evicting anything)."""
        return len(self._free) + self.num_blocks - self.next_fresh

    def evict_until(self, num: int) -> None:
        """Evict unlocked tree leaves (LRU) until the free list holds `num` blocks or nothing
        more can be evicted."""
        short = num - len(self._free) - self.num_blocks + self.next_fresh   # num - num_free_list
        if short > 0 and self.tree.evictable_size:
            evicted = self.tree.evict(short)
            for block in evicted:
                self._place[block] = FREE
            self._free.extend(evicted)
            self._event(-1, evicted, -2)

    def can_allocate(self, num: int) -> bool:
        return num <= self.num_free

    # ---- matching and allocation ------------------------------------------------------------

    def match(self, keys: list[int], end: int | None = None) -> tuple[list[int], RadixNode]:
        """Blocks of the longest cached prefix of keys[:end] and its node (locks nothing)."""
        if not self.caching:
            return [], self.tree.root
        return self.tree.match_prefix(keys, end)

    def lock(self, node: RadixNode) -> None:
        self.tree.lock(node)

    def unlock(self, node: RadixNode) -> None:
        self.tree.unlock(node)

    def admit(self, request: Request, hits: list[int], node: RadixNode) -> None:
        """A request starts holding its cached prefix `hits` (the path to `node`, which the
        caller has locked)."""
        assert not request.num_blocks
        self.num_holders += 1
        self._node[request.id], self._tree_len[request.id] = node, len(hits)
        request.blocks, request.num_blocks = list(hits), len(hits)
        if hits:
            self._event(request.id, hits, 1)

    def allocate(self, request: Request, num: int) -> list[int]:
        """`num` private blocks for an admitted request, evicting tree leaves when the free
        list is short (caller checked can_allocate)."""
        free = self._free
        if len(free) + self.num_blocks - self.next_fresh < num:
            self.evict_until(num)
            assert self.num_free_list >= num, "eviction did not free enough blocks"
        if self.next_fresh < self.num_blocks:   # until every id was handed out once
            taken = self._take_fresh(num, request.id)
        else:
            taken = [free.popleft() for _ in range(num)]
            place, rid = self._place, request.id
            for block in taken:
                place[block] = rid
        request.blocks.extend(taken)
        request.num_blocks += num
        self._event(request.id, taken, 1)
        return taken

    def allocate_each(self, requests: list[Request]) -> list[int]:
        """One new block to each request in order, as a decode formation takes them: tree
        leaves are evicted for all of them first when the free list is short (fast-forward's
        bulk growth; the caller checked that free + evictable blocks suffice)."""
        num = len(requests)
        self.evict_until(num)
        assert self.num_free_list >= num, "eviction did not free enough blocks"
        start = self.next_fresh
        end = min(self.num_blocks, start + num)
        self.next_fresh = end
        place, free, event, records = self._place, self._free, self._event, self._records
        place.extend([FREE] * (end - start))   # owners set below
        taken = list(range(start, end)) + [free.popleft() for _ in range(num - (end - start))]
        for request, block in zip(requests, taken):   # the order allocate() takes them one by one
            place[block] = request.id
            request.blocks.append(block)
            request.num_blocks += 1
            if records:
                event(request.id, [block], 1)
        return taken

    def _take_fresh(self, num: int, owner: int) -> list[int]:
        """`num` blocks off the front of the free list: the never-used ids, then returned ones;
        all placed with `owner`."""
        start = self.next_fresh
        end = min(self.num_blocks, start + num)
        self.next_fresh = end
        self._place.extend([owner] * (end - start))
        taken = list(range(start, end))
        free, place = self._free, self._place
        for _ in range(num - len(taken)):
            block = free.popleft()
            place[block] = owner
            taken.append(block)
        return taken

    # ---- caching a request's blocks -----------------------------------------------------------

    def insert(self, request: Request, keys: list[int], num_tokens: int) -> None:
        """SGLang's cache_unfinished_req: the full blocks of the request's first `num_tokens`
        computed tokens join the tree; blocks the tree already had (another request cached the
        same content meanwhile) are freed and replaced in the table by the tree's; the lock
        moves to the new end of the path."""
        if not self.caching:
            return
        count = min(num_tokens // self.block_size, len(keys), request.num_blocks)
        start = self._tree_len[request.id]
        if count <= start:
            return
        table = request.blocks
        held = self._node[request.id]   # the end of its table's tree part, keys[:start]
        # (held lies on the new path: its lock moves down to the new end)
        present, path = self.tree.insert_and_match(keys, table, count, held, start, move_lock=True)
        if present > start:   # the tree had table[start:present]'s content already: its blocks replace them
            cached = [block for node in path[1:] for block in node.value][start:present]
            duplicates = table[start:present]
            self._release(request.id, duplicates)
            self._event(request.id, duplicates, -1)
        new = table[max(start, present):count]
        place = self._place
        for block in new:
            place[block] = IN_TREE
        if new:
            self._event(-1, new, 2)
        if present > start:
            self._event(request.id, cached, 1)
            table[start:present] = cached
        self._node[request.id], self._tree_len[request.id] = path[-1], count

    def free(self, request: BlockHolder) -> list[int]:
        """Let go of everything: unlock the tree path (it stays cached, now evictable) and free
        the private blocks; returns the table."""
        blocks = request.blocks
        if request.id in self._node:
            self.tree.unlock(self._node.pop(request.id))
            start = self._tree_len.pop(request.id)
            self._release(request.id, blocks[start:])
            self.num_holders -= 1
            request.blocks, request.num_blocks = [], 0
            if blocks:
                self._event(request.id, blocks, -1)
        return blocks

    def _release(self, owner: int, blocks: list[int]) -> None:
        for block in blocks:
            assert self._place[block] == owner, "freeing a block the request does not own"
            self._place[block] = FREE
        self._free.extend(blocks)

    # ---- invariants ---------------------------------------------------------------------------

    def check_integrity(self, holders: list[Request] | None = None) -> None:
        """Assert: free + tree + private == total with every block in one place; the tree is
        whole; with `holders`, every table is a locked tree path then private blocks, and each
        node's lock count equals the holders whose path runs through it."""
        self.tree.check_integrity()
        tree = self.tree.blocks()
        assert len(set(tree)) == len(tree) and all(self._place[b] == IN_TREE for b in tree), "tree blocks misplaced"
        assert len(self._place) == self.next_fresh <= self.num_blocks, "place table out of step"
        assert all(self._place[b] == FREE for b in self._free) and len(set(self._free)) == len(self._free)
        private = sum(1 for p in self._place if p >= 0)
        assert self.num_free_list + len(tree) + private == self.num_blocks, "free + tree + private != total"
        if holders is None:
            return
        expected: dict[int, int] = {}
        for request in holders:
            start = self._tree_len[request.id]
            node = self._node[request.id]
            path = _path_blocks(node)
            assert request.blocks[:start] == path, "table head is not the locked tree path"
            assert all(self._place[b] == request.id for b in request.blocks[start:]), "private block misplaced"
            assert request.num_blocks == len(request.blocks)
            while node.parent is not None:
                expected[id(node)] = expected.get(id(node), 0) + 1
                node = node.parent
        for node in self.tree._nodes():
            if node is not self.tree.root:
                assert node.lock_ref == expected.get(id(node), 0), "lock count != holders on the path"
        assert private == sum(r.num_blocks - self._tree_len[r.id] for r in holders), "a private block has no holder"
        assert len(holders) == self.num_holders == len(self._node), "holder count drifted"


def _path_blocks(node: RadixNode) -> list[int]:
    parts = []
    while node.parent is not None:
        parts.append(node.value)
        node = node.parent
    return [block for part in reversed(parts) for block in part]
