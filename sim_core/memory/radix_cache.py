"""A radix tree of cached prefixes (SGLang's RadixCache), over sequences of page keys.

Each edge holds a run of keys and the KV block ids that hold them (one block per key). A
request locks the path to the node where its match ends (`lock` / `unlock` count along the
path); unlocked leaves can be evicted, least recently used first, and a parent whose last
child goes becomes a leaf candidate in the same pass. Recency is a logical clock (every node
below the root touched by a match or an insert gets the next tick, root to leaf), so eviction
order is deterministic. `evictable_size` + `protected_size` is the number of blocks in the tree.

The eviction heap lives as long as the tree: an entry (tick, leaf) is pushed whenever an
unlocked node becomes a leaf, an unlocked leaf is touched or a leaf is unlocked (a locked leaf
gets its entry when its last holder lets go, at the tick it has then); an entry whose node is no
longer a leaf, has been touched since or is locked is stale and dropped when popped (the heap is
rebuilt from the leaves when stale entries pile up). So every unlocked leaf has an entry at its
current tick: popping gives the unlocked leaves in the order a heap of them built from scratch
would.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

STALE_SLACK = 1024   # stale heap entries tolerated (beyond one per leaf) before the heap is rebuilt


class RadixNode:
    """A tree node: the edge from its parent (`key`, `value`), children by first key."""

    __slots__ = ("children", "key", "last_access", "lock_ref", "parent", "value")

    def __init__(self, key: list, value: list, parent: RadixNode | None, tick: int) -> None:
        self.key, self.value, self.parent = key, value, parent
        self.children: dict = {}
        self.lock_ref = 0
        self.last_access = tick

    def __lt__(self, other: RadixNode) -> bool:
        return self.last_access < other.last_access


class RadixCache:
    """Cached prefixes as a radix tree; values are KV block ids (the caller owns the pool)."""

    def __init__(self) -> None:
        self._tick = 0
        self.root = RadixNode([], [], None, 0)
        self.root.lock_ref = 1
        self.evictable_size = 0   # blocks in unlocked nodes
        self.protected_size = 0   # blocks in locked nodes
        self._leaves: set[RadixNode] = set()   # nodes without children, the root aside: eviction candidates
        # (tick, leaf) for every leaf, and stale entries: ticks are unique (every touch takes the
        # next one), so the heap orders by the int alone and never compares nodes
        self._heap: list[tuple[int, RadixNode]] = []

    def _touch(self, node: RadixNode) -> None:
        """Make `node` the most recently used (never the root, whose recency nobody reads)."""
        self._tick += 1
        node.last_access = self._tick
        if not node.children and not node.lock_ref:   # an unlocked leaf: its entry is now this one
            self._push(node)

    def _push(self, leaf: RadixNode) -> None:
        heap = self._heap
        heapq.heappush(heap, (leaf.last_access, leaf))
        if len(heap) > 2 * len(self._leaves) + STALE_SLACK:
            self._heap = [(node.last_access, node) for node in self._leaves]
            heapq.heapify(self._heap)

    def match_prefix(self, keys: list, end: int | None = None) -> tuple[list, RadixNode]:
        """Blocks of the longest cached prefix of keys[:end] (`end` None: all of them) and the
        node where it ends (an edge matched part way is split there). Touches the matched path;
        locks nothing."""
        node, i = self.root, 0
        end = len(keys) if end is None else min(end, len(keys))
        values: list = []
        while i < end:
            child = node.children.get(keys[i])
            if child is None:
                break
            self._tick += 1   # _touch, inline
            child.last_access = self._tick
            if not child.children and not child.lock_ref:
                self._push(child)
            edge = child.key
            limit = min(len(edge), end - i)
            matched = limit if edge[:limit] == keys[i:i + limit] else _common_length(edge, keys, i, end)
            if matched < len(edge):
                child = self._split(child, matched)
            values += child.value
            node, i = child, i + matched
        return values, node

    def insert(self, keys: list, values: list) -> int:
        """Cache `values` (blocks) under `keys`; returns how many leading keys were already
        cached (the caller frees its own blocks for them). New nodes are unlocked."""
        assert len(keys) == len(values)
        node, i, end = self.root, 0, len(keys)
        while i < end:
            child = node.children.get(keys[i])
            if child is None:
                break
            self._touch(child)
            matched = _common_length(child.key, keys, i, end)
            if matched < len(child.key):
                child = self._split(child, matched)
            node, i = child, i + matched
        if i < end:
            self._touch(self._add_leaf(node, keys, values, i, end))
        return i

    def insert_and_match(self, keys: list, values: list, count: int, start_node: RadixNode | None = None,
                         start: int = 0, move_lock: bool = False) -> tuple[int, list[RadixNode]]:
        """`insert(keys[:count], values[:count])`, then `match_prefix(keys[:count])`, in one
        walk: returns how many leading keys were cached already and the nodes, root first,
        whose edges hold the `count` keys. The touches are the two calls' to the order they
        leave: insert's touches of the path are overwritten by the match's, all but that of the
        edge it splits (whose lower part is off the path), so that one is made as the walk
        passes and the path's are made once, root to leaf, at the end. `start_node`: a node
        whose path holds keys[:start] (a holder's locked node, `start` <= `count`): the walk
        starts there, its path read upward. `move_lock`: then `move_lock(start_node or the
        root, the path's end)` too, before the end's recency is filed (a locked end needs no
        heap entry: the unlock files it)."""
        assert count <= min(len(keys), len(values))
        if start_node is None:
            node, i = self.root, 0
            path = [node]
        else:
            node, i = start_node, start
            path = [node]
            while node.parent is not None:
                node = node.parent
                path.append(node)
            path.reverse()
            node = start_node
        while i < count:
            child = node.children.get(keys[i])
            if child is None:
                break
            matched = _common_length(child.key, keys, i, count)
            if matched < len(child.key):
                self._touch(child)
                child = self._split(child, matched)
            node, i = child, i + matched
            path.append(node)
        if i < count:
            path.append(self._add_leaf(node, keys, values, i, count))
        tick = self._tick
        for node in path[1:]:   # only the last node of the path can be a leaf
            tick += 1
            node.last_access = tick
        self._tick = tick
        if move_lock:
            self.move_lock(path[0] if start_node is None else start_node, node)
        if not node.children and not node.lock_ref and node is not self.root:
            self._push(node)
        return i, path

    def _add_leaf(self, parent: RadixNode, keys: list, values: list, start: int, end: int) -> RadixNode:
        """A new unlocked leaf under `parent` holding keys[start:end] (not touched yet)."""
        leaf = RadixNode(keys[start:end], values[start:end], parent, self._tick)
        self._leaves.discard(parent)
        self._leaves.add(leaf)
        parent.children[keys[start]] = leaf
        self.evictable_size += end - start
        return leaf

    def _split(self, child: RadixNode, length: int) -> RadixNode:
        """Cut `child`'s edge after `length` keys; returns the new upper node."""
        self._tick += 1
        upper = RadixNode(child.key[:length], child.value[:length], child.parent, self._tick)
        upper.lock_ref = child.lock_ref
        upper.children = {child.key[length]: child}
        assert child.parent is not None, "the root is never split"
        child.parent.children[child.key[0]] = upper
        child.key, child.value, child.parent = child.key[length:], child.value[length:], upper
        return upper

    def lock(self, node: RadixNode) -> None:
        """Protect the path from `node` to the root from eviction (one more holder)."""
        while node is not self.root:
            if node.lock_ref == 0:
                self.evictable_size -= len(node.value)
                self.protected_size += len(node.value)
            node.lock_ref += 1
            parent = node.parent
            assert parent is not None, "only the root has no parent"
            node = parent

    def unlock(self, node: RadixNode) -> None:
        """Undo one `lock(node)`. A leaf left unlocked gets its heap entry back (eviction drops
        the entries of locked leaves)."""
        leaf = node
        while node is not self.root:
            assert node.lock_ref > 0, "unlock without lock"
            if node.lock_ref == 1:
                self.evictable_size += len(node.value)
                self.protected_size -= len(node.value)
            node.lock_ref -= 1
            parent = node.parent
            assert parent is not None, "only the root has no parent"
            node = parent
        if leaf.lock_ref == 0 and not leaf.children and leaf is not self.root:
            self._push(leaf)

    def move_lock(self, old: RadixNode, new: RadixNode) -> None:
        """`unlock(old)` then `lock(new)` where `old` is on the path from the root to `new` (a
        holder's lock moving down its own path): the nodes from `old` up keep their counts,
        so only those below it are walked."""
        node = new
        while node is not old:
            assert node is not self.root, "move_lock: old is not on new's path"
            if node.lock_ref == 0:
                self.evictable_size -= len(node.value)
                self.protected_size += len(node.value)
            node.lock_ref += 1
            node = self._parent(node)

    def evict(self, num_blocks: int) -> list:
        """Remove unlocked leaves, least recently used first, until at least `num_blocks`
        blocks are freed or nothing more can go; returns the freed blocks in eviction order
        (every node has its own tick, so the order does not depend on how leaves are listed).
        A locked leaf's entry is dropped when popped: `unlock` pushes it again."""
        heap, leaves, root = self._heap, self._leaves, self.root
        heappop = heapq.heappop
        freed: list = []
        while len(freed) < num_blocks and heap:
            tick, leaf = heappop(heap)
            if tick != leaf.last_access or leaf.lock_ref or leaf not in leaves:
                continue   # stale, or locked
            freed += leaf.value
            parent = leaf.parent
            assert parent is not None, "only the root has no parent"
            del parent.children[leaf.key[0]]
            leaves.discard(leaf)
            self.evictable_size -= len(leaf.value)
            if not parent.children and parent is not root:
                leaves.add(parent)
                if not parent.lock_ref:   # (a locked one is filed when its holder lets go)
                    heapq.heappush(heap, (parent.last_access, parent))
        return freed

    @staticmethod
    def _parent(node: RadixNode) -> RadixNode:
        assert node.parent is not None, "only the root has no parent"
        return node.parent

    def _nodes(self) -> Iterator[RadixNode]:
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def blocks(self) -> list:
        """Every block in the tree."""
        return [block for node in self._nodes() for block in node.value]

    def check_integrity(self) -> None:
        """Assert the tree's shape and that evictable + protected sizes match its nodes."""
        evictable = protected = 0
        for node in self._nodes():
            if node is self.root:
                assert not node.key and node.lock_ref >= 1, "root changed"
                continue
            assert node.key and len(node.key) == len(node.value), "edge keys and blocks differ"
            assert self._parent(node).children.get(node.key[0]) is node, "child filed under a wrong key"
            assert node.lock_ref >= sum(c.lock_ref for c in node.children.values()), "lock not on the path"
            if node.lock_ref:
                protected += len(node.value)
            else:
                evictable += len(node.value)
        assert (evictable, protected) == (self.evictable_size, self.protected_size), "sizes drifted"
        leaves = {node for node in self._nodes() if not node.children and node is not self.root}
        assert leaves == self._leaves, "leaf set out of step"
        current = {node for tick, node in self._heap if node in leaves and node.last_access == tick}
        unlocked = {node for node in leaves if not node.lock_ref}
        assert unlocked <= current, "an unlocked leaf has no heap entry at its tick"


def _common_length(edge: list, keys: list, start: int, end: int) -> int:
    """How many leading keys of `edge` equal keys[start:end]."""
    limit = min(len(edge), end - start)
    if edge[:limit] == keys[start:start + limit]:   # the usual case, compared in C
        return limit
    n = 0   # a mismatch lies before limit
    while edge[n] == keys[start + n]:
        n += 1
    return n
