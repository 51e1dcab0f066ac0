"""Block-hash prefix caching (vLLM v1's BlockPool): reference-counted blocks that keep their key
after they are freed.

Free blocks wait in a queue in eviction order (front first); a fresh pool queues 0, 1, 2, ...
A block whose last holder lets go keeps its key and joins the back of the queue, so it is still
a prefix hit (a hit takes it out of the queue again) until it reaches the front and is handed
out as a new block, which drops its key: that is eviction, least recently freed first. A block
freed without a key (never filled) can never be a hit: it joins the front, to be reused first
(vLLM 0.33's `BlockPool.free_blocks`). A request frees its blocks last block first, so the tail
of a sequence, the part least likely shared, is evicted before its head.

Memory grows with the blocks the run uses, not with `num_blocks`. The queue is held in three parts:

    _unkeyed                   blocks freed without a key, front first (the latest frees first)
    [next_fresh, num_blocks)   never handed out: implicit, in id order
    _cached                    blocks freed with a key, front first (least recently freed)

This is exactly the queue of a pool that starts with every id queued: unkeyed frees are put in
front of everything, keyed ones behind everything. `_ref`, `_key` and `_stale` cover ids
[0, next_fresh).

A hit on a cached free block takes it out of the middle of `_cached`: its entry stays there,
counted in `_stale[block]`, and is skipped when it reaches the front (a block's stale entries
all lie before its live one, which a later free appends). `_cached` is rebuilt without them when
they outnumber the live ones.

The key index keeps, per key, the blocks holding it oldest first: the oldest in `_by_key` (one
int: almost every key is held by one block), any later ones in `_more` (two requests computed
the same content before either was cached). While `_more` is empty, `_by_key[key]` is the one
block holding `key`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from itertools import takewhile

from sim_core.entities import Request
from sim_core.memory.kv_pool import BlockHolder

STALE_SLACK = 1024   # stale entries tolerated in the cached free queue before it is rebuilt


class HashedBlockPool:
    """`num_blocks` blocks of `block_size` tokens with reference counts and prefix-cache keys.

    A request's block table is `request.blocks` (shared blocks appear in several tables).
    `on_cache(blocks, delta)`, when given, is told of blocks that got (+2) or lost (-2) a key.
    Methods never raise for ordinary backpressure: callers ask `can_allocate` first.
    """

    tracks_ids = True

    def __init__(self, num_blocks: int, block_size: int,
                 on_cache: Callable[[list[int], int], None] | None = None) -> None:
        assert num_blocks >= 1
        self.num_blocks, self.block_size = num_blocks, block_size
        self._unkeyed: deque[int] = deque()                   # blocks freed without a key, front first
        self._cached: deque[int] = deque()                    # blocks freed with a key, front first, and stale entries
        self._num_cached = 0                                  # live entries of _cached
        self.next_fresh = 0                                   # ids >= this were never handed out
        self._ref: list[int] = []                             # per id below next_fresh
        self._key: list[int | None] = []
        self._stale: list[int] = []                           # stale entries of each block in _cached
        self._num_stale = 0
        self._by_key: dict[int, int] = {}                # key -> the oldest block holding it
        self._more: dict[int, dict[int, None]] = {}      # key -> the later blocks holding it, oldest first
        self.keyed: dict[int, int] = {}        # request id -> leading table blocks with keys (read outside)
        self.num_holders = 0
        self._on_cache = on_cache   # None: nobody listens (the hot paths skip the call)

    @property
    def num_free(self) -> int:
        """Blocks nobody holds (cached ones included: they are evictable)."""
        return len(self._unkeyed) + self._num_cached + self.num_blocks - self.next_fresh

    @property
    def num_used(self) -> int:
        return self.next_fresh - self._num_cached - len(self._unkeyed)

    def num_cached_free(self) -> int:
        return self._num_cached

    def ref_count(self, block: int) -> int:
        return self._ref[block] if block < self.next_fresh else 0

    def key_of(self, block: int) -> int | None:
        return self._key[block] if block < self.next_fresh else None

    def free_order(self) -> list[int]:
        """The free queue, front (next to be handed out) first (for tests: lists every free id)."""
        return [*self._unkeyed, *range(self.next_fresh, self.num_blocks), *self._live_cached()]

    def _live_cached(self) -> list[int]:
        """The live entries of `_cached`, front first: a block's live entry is its last one, and
        only a block nobody holds has one (a held block's entries are all stale)."""
        if not self._num_stale:
            return list(self._cached)
        last_first = dict.fromkeys(reversed(self._cached))   # each block once, by its last entry
        ref = self._ref
        return [block for block in reversed(last_first) if not ref[block]]

    # ---- lookups and allocation -------------------------------------------------------------

    def cached_prefix(self, keys: list[int]) -> list[int]:
        """Blocks holding the longest cached prefix of `keys` (stops at the first miss); the
        oldest block is taken when several hold a key. Does not change anything."""
        by_key = self._by_key
        return list(map(by_key.__getitem__, takewhile(by_key.__contains__, keys)))   # (in C)

    def can_allocate(self, num: int, hits: Sequence[int] = ()) -> bool:
        """Whether `num` new blocks fit beside the `hits` a request is about to take (a hit that
        is free cannot also be handed out as a new block)."""
        if not hits:
            return num <= self.num_free
        ref = self._ref
        return num <= self.num_free - [ref[block] for block in hits].count(0)

    def allocate(self, request: Request, num: int, hits: Sequence[int] = ()) -> list[int]:
        """Give `request` the cached `hits` (first, once, as its table's head) and `num` new
        blocks; returns every block taken, in table order (caller checked can_allocate)."""
        if num != 1 or hits:
            return self._allocate_many(request, num, hits)
        # the hot path, step for step as _allocate_many: a decode's next block
        if not request.num_blocks:
            self.num_holders += 1
            self.keyed[request.id] = 0
        if self._unkeyed:
            block = self._unkeyed.popleft()
            self._ref[block] = 1
        elif self.next_fresh < self.num_blocks:
            block = self.next_fresh
            self.next_fresh += 1
            self._ref.append(1)
            self._key.append(None)
            self._stale.append(0)
        else:   # `_evict_front` inline
            cached, stale = self._cached, self._stale
            block = cached.popleft()
            while stale[block]:
                stale[block] -= 1
                self._num_stale -= 1
                block = cached.popleft()
            self._num_cached -= 1
            key = self._key[block]
            if key is not None:
                if self._more:
                    self._drop_key(block)
                else:   # the key's only holder
                    self._key[block] = None
                    del self._by_key[key]
                if self._on_cache is not None:
                    self._on_cache([block], -2)
            self._ref[block] = 1
        request.blocks.append(block)
        request.num_blocks += 1
        return [block]

    def _allocate_many(self, request: Request, num: int, hits: Sequence[int]) -> list[int]:
        if not request.num_blocks:
            self.num_holders += 1
            self.keyed[request.id] = len(hits)
        ref, stale = self._ref, self._stale
        taken = list(hits)
        out = 0   # hits taken out of the cached free blocks: their entries there go stale
        for block in hits:
            if ref[block]:
                ref[block] += 1
            else:
                stale[block] += 1
                ref[block] = 1
                out += 1
        self._num_stale += out
        self._num_cached -= out
        reused = min(num, len(self._unkeyed))
        for _ in range(reused):
            block = self._unkeyed.popleft()
            ref[block] = 1
            taken.append(block)
        fresh = self._take_fresh(num - reused, taken) if self.next_fresh < self.num_blocks else 0
        evicted = []
        key_of, by_key, cached = self._key, self._by_key, self._cached
        count = num - reused - fresh
        if count > 1 and not self._num_stale and not self._more:
            # every entry live, every key held once: the front `count` blocks, each keyed (a
            # free block in `_cached` keeps its key), lose their keys and are taken in order
            popleft = cached.popleft
            evicted = [popleft() for _ in range(count)]
            self._num_cached -= count
            for block in evicted:   # (a block in `_cached` is keyed)
                del by_key[key_of[block]]   # type: ignore[arg-type]
                key_of[block] = None
                ref[block] = 1
            taken.extend(evicted)
            count = 0
        for _ in range(count):
            block = self._evict_front()
            if block < 0:   # it had a key
                block = ~block
                evicted.append(block)
            ref[block] = 1
            taken.append(block)
        if evicted and self._on_cache is not None:
            self._on_cache(evicted, -2)
        request.blocks.extend(taken)
        request.num_blocks += len(taken)
        return taken

    def _take_fresh(self, num: int, taken: list[int]) -> int:
        """Up to `num` never-used ids (the front of the queue, in order) onto `taken`, each with
        one reference; returns how many."""
        start = self.next_fresh
        end = min(self.num_blocks, start + num)
        taken.extend(range(start, end))
        self.next_fresh = end
        self._ref.extend([1] * (end - start))
        self._key.extend([None] * (end - start))
        self._stale.extend([0] * (end - start))
        return end - start

    def _evict_front(self) -> int:
        """Take the front of the cached free blocks (stale entries skipped) and drop its key:
        the block, or ~block when it had a key (`allocate`'s decode path does the same inline)."""
        cached, stale = self._cached, self._stale
        block = cached.popleft()
        while stale[block]:
            stale[block] -= 1
            self._num_stale -= 1
            block = cached.popleft()
        self._num_cached -= 1
        key = self._key[block]
        if key is None:
            return block
        if self._more:
            self._drop_key(block)
        else:   # the key's only holder (`_drop_key` inline)
            self._key[block] = None
            del self._by_key[key]
        return ~block

    def allocate_one(self, request: Request) -> int:
        """One new block for a request that already holds blocks."""
        return self.allocate(request, 1)[0]

    def allocate_each(self, requests: list[Request]) -> list[int]:
        """One new block to each request in order (fast-forward's bulk growth); returns them."""
        return [self.allocate(request, 1)[0] for request in requests]

    def num_keyed(self, request: Request) -> int:
        """Leading blocks of the request's table known to have keys: cache_blocks for no more
        than this many full blocks changes nothing."""
        return self.keyed.get(request.id, 0)

    def cache_blocks(self, request: Request, keys: list[int], num_tokens: int) -> list[int]:
        """Key the request's blocks that `num_tokens` tokens fill completely (those already
        keyed are skipped); returns the blocks that got a key."""
        full = min(num_tokens // self.block_size, len(keys), request.num_blocks)
        start = self.keyed.get(request.id, 0)
        if full <= start:
            return []
        if full == start + 1:   # the usual call (a decode filled its newest block): the loop below, for one
            self.keyed[request.id] = full
            block = request.blocks[start]
            if self._key[block] is not None:
                return []
            key = self._key[block] = keys[start]
            if self._by_key.setdefault(key, block) != block:   # held already: this block is a later holder
                self._more.setdefault(key, {})[block] = None
            if self._on_cache is not None:
                self._on_cache([block], 2)
            return [block]
        keyed = []
        key_of, by_key = self._key, self._by_key
        for block, key in zip(request.blocks[start:full], keys[start:full]):
            if key_of[block] is None:
                key_of[block] = key
                if by_key.setdefault(key, block) != block:   # held already: this block is a later holder
                    self._more.setdefault(key, {})[block] = None
                keyed.append(block)
        self.keyed[request.id] = full
        if keyed and self._on_cache is not None:
            self._on_cache(keyed, 2)
        return keyed

    def free(self, request: BlockHolder) -> list[int]:
        """Let go of all of `request`'s blocks, last first (keyed ones to the back of the queue,
        the others to its front, in that order); returns its table."""
        blocks = request.blocks
        if blocks:
            ref, cached, key, unkeyed = self._ref, self._cached, self._key, []
            size = len(cached)
            for block in reversed(blocks):
                count = ref[block] = ref[block] - 1
                if not count:
                    if key[block] is None:
                        unkeyed.append(block)
                    else:
                        cached.append(block)
            self._num_cached += len(cached) - size
            self._unkeyed.extendleft(reversed(unkeyed))
            if self._num_stale > max(STALE_SLACK, self._num_cached):
                self._compact()
            self.num_holders -= 1
            self.keyed.pop(request.id, None)
            request.blocks, request.num_blocks = [], 0
        return blocks

    def _compact(self) -> None:
        """Rebuild `_cached` from its live entries (same order)."""
        self._cached = deque(self._live_cached())
        self._stale = [0] * self.next_fresh
        self._num_stale = 0

    def _drop_key(self, block: int) -> None:
        key = self._key[block]
        assert key is not None, "only keyed blocks lose their key"
        self._key[block] = None
        more = self._more.get(key) if self._more else None
        if more is None:   # the key's only holder
            del self._by_key[key]
        elif block in more:
            del more[block]
        else:   # the oldest holder goes: the next oldest takes its place
            self._by_key[key] = next(iter(more))
            del more[self._by_key[key]]
        if more is not None and not more:
            del self._more[key]

    # ---- invariants -------------------------------------------------------------------------

    def check_integrity(self, holders: list[Request] | None = None) -> None:
        """Assert: the free queue is exactly the unreferenced blocks, keyed ones at its back; the
        key index matches the blocks' keys; with `holders` (every request holding blocks),
        reference counts equal the number of tables holding each block."""
        assert len(self._ref) == len(self._key) == len(self._stale) == self.next_fresh <= self.num_blocks, \
            "tables out of step"
        cached = self._live_cached()
        assert len(cached) == self._num_cached, "cached free count drifted"
        assert sum(self._stale) == self._num_stale == len(self._cached) - len(cached), "stale entries drifted"
        freed = [*self._unkeyed, *cached]
        assert all(b < self.next_fresh for b in freed), "a never-used block is in the freed queue"
        assert all(self._ref[b] == 0 for b in freed), "a referenced block is in the free queue"
        assert all(self._key[b] is None for b in self._unkeyed), "a keyed block is at the front of the queue"
        assert all(self._key[b] is not None for b in cached), "an unkeyed block is at the back of the queue"
        assert sum(1 for r in self._ref if r == 0) == len(freed) == len(set(freed)), "an unreferenced block is lost"
        assert all(r >= 0 for r in self._ref), "negative reference count"
        indexed = [*self._by_key.items(), *((key, b) for key, blocks in self._more.items() for b in blocks)]
        assert len(indexed) == len(set(indexed)), "a block indexed twice under one key"
        assert set(indexed) == {(k, b) for b, k in enumerate(self._key) if k is not None}, "key index drifted"
        assert all(self._more.values()) and self._more.keys() <= self._by_key.keys(), "a later holder without an oldest"
        if holders is None:
            return
        counts = [0] * self.next_fresh
        for request in holders:
            assert request.num_blocks == len(request.blocks), "block count drifted"
            assert len(set(request.blocks)) == len(request.blocks), "a block twice in one table"
            for block in request.blocks:
                counts[block] += 1
        assert counts == self._ref, "reference counts do not match the block tables"
        assert sum(1 for r in holders if r.blocks) == self.num_holders, "holder count drifted"
