"""The radix tree's one-walk operations and its eviction heap against the behaviour they
replace (hypothesis).

`RadixCache.insert_and_match(keys, values, count, ...)` stands for `insert(keys[:count], ...)`
then `match_prefix(keys[:count])` (started at a holder's node or at the root),
`match_prefix(keys, end)` for `match_prefix(keys[:end])`, and
`move_lock(old, new)` for `unlock(old)` then `lock(new)`, and `insert_and_match(...,
move_lock=True)` for the insert and match then `move_lock`; eviction drops a locked leaf's heap
entry (unlocking pushes it again) where it used to push it back, and a leaf touched, or left a
leaf by an eviction, while locked gets no entry (its unlock files one). The reference tree below
makes the separate calls and keeps the old heap; both trees get the same random
operations (holders caching longer and longer prefixes of their own keys, as a request does,
lookups, evictions, releases) and must answer the same at every step: the same blocks, paths,
sizes and eviction order (recency ticks may differ in value, never in order).
"""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.memory.radix_cache import RadixCache, RadixNode


class ReferenceTree(RadixCache):
    """The one-walk operations as the separate calls they replace."""

    def insert_and_match(self, keys: list, values: list, count: int, start_node: RadixNode | None = None,
                         start: int = 0) -> tuple[int, list[RadixNode]]:
        present = self.insert(keys[:count], values[:count])
        _, node = self.match_prefix(keys[:count])
        path = [node]
        while node.parent is not None:
            node = node.parent
            path.append(node)
        return present, path[::-1]

    def _touch(self, node: RadixNode) -> None:   # every touched leaf pushed, locked or not
        self._tick += 1
        node.last_access = self._tick
        if not node.children:
            self._push(node)

    def match_prefix(self, keys: list, end: int | None = None) -> tuple[list, RadixNode]:
        keys = keys if end is None else keys[:end]
        node, i, values = self.root, 0, []
        while i < len(keys):
            child = node.children.get(keys[i])
            if child is None:
                break
            self._touch(child)
            matched = 0
            while matched < min(len(child.key), len(keys) - i) and child.key[matched] == keys[i + matched]:
                matched += 1
            if matched < len(child.key):
                child = self._split(child, matched)
            values += child.value
            node, i = child, i + matched
        return values, node

    def move_lock(self, old: RadixNode, new: RadixNode) -> None:
        self.unlock(old)
        self.lock(new)

    def unlock(self, node: RadixNode) -> None:   # no heap push: locked leaves keep their entries
        while node is not self.root:
            if node.lock_ref == 1:
                self.evictable_size += len(node.value)
                self.protected_size -= len(node.value)
            node.lock_ref -= 1
            assert node.parent is not None
            node = node.parent

    def evict(self, num_blocks: int) -> list:   # locked leaves popped go back into the heap
        freed: list = []
        locked = []
        while len(freed) < num_blocks and self._heap:
            tick, leaf = heapq.heappop(self._heap)
            if tick != leaf.last_access or leaf not in self._leaves:
                continue
            if leaf.lock_ref > 0:
                locked.append((tick, leaf))
                continue
            freed.extend(leaf.value)
            parent = leaf.parent
            assert parent is not None
            del parent.children[leaf.key[0]]
            self._leaves.discard(leaf)
            self.evictable_size -= len(leaf.value)
            if not parent.children and parent is not self.root:
                self._leaves.add(parent)
                heapq.heappush(self._heap, (parent.last_access, parent))
        for entry in locked:
            heapq.heappush(self._heap, entry)
        return freed


# ops: ("cache", holder, keys, count) / ("match", keys, end) / ("evict", n) / ("release", holder)
KEYS = st.lists(st.integers(0, 2), min_size=1, max_size=7)
OPS = st.lists(st.one_of(
    st.tuples(st.just("cache"), st.integers(0, 3), KEYS, st.integers(0, 7)),
    st.tuples(st.just("match"), KEYS, st.one_of(st.none(), st.integers(0, 8))),
    st.tuples(st.just("evict"), st.integers(1, 6)),
    st.tuples(st.just("release"), st.integers(0, 3)),
), max_size=40)


def _apply(tree: RadixCache, ops: list, fused: bool = False) -> list:
    """Run `ops` on `tree`; returns everything it answered. A holder keeps its keys (the first
    ones it caches with) and the node and count of its last cache, as a request does. `fused`:
    a cache moves the holder's lock inside `insert_and_match` (as the pool does)."""
    holders: dict[int, tuple[list, RadixNode, int]] = {}
    answers: list = []
    next_block = 0
    for op in ops:
        if op[0] == "cache":
            _, holder, keys, count = op
            keys, node, done = holders.get(holder, (keys, tree.root, 0))
            count = min(max(count, done + 1), len(keys))
            if count <= done:
                continue
            values = list(range(next_block, next_block + len(keys)))
            next_block += len(keys)
            start = node if holder in holders else None
            if fused:
                present, path = tree.insert_and_match(keys, values, count, start, done, move_lock=True)
            else:
                present, path = tree.insert_and_match(keys, values, count, start, done)
                if holder in holders:
                    tree.move_lock(node, path[-1])
                else:
                    tree.lock(path[-1])
            holders[holder] = (keys, path[-1], count)
            answers.append((present, [n.value for n in path]))
        elif op[0] == "match":
            values, node = tree.match_prefix(op[1], op[2])
            answers.append((values, node.key))
        elif op[0] == "evict":
            answers.append(tree.evict(op[1]))
        elif op[1] in holders:
            tree.unlock(holders.pop(op[1])[1])
        answers.append((tree.evictable_size, tree.protected_size))
        tree.check_integrity()
    for _, node, _ in holders.values():
        tree.unlock(node)
    answers.append(tree.evict(10**6))   # the whole LRU order
    return answers


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_one_walk_operations_answer_as_the_calls_they_replace(ops):
    reference = _apply(ReferenceTree(), ops)
    assert _apply(RadixCache(), ops) == reference
    assert _apply(RadixCache(), ops, fused=True) == reference


def test_move_lock_walks_only_below_the_old_end():
    """[1 2] then [1 2 3 4] cached by one holder: its lock moves from [1 2]'s node to [3 4]'s;
    [1 2] keeps one lock, [3 4] gains one: 4 blocks protected, none evictable."""
    tree = RadixCache()
    _, short = tree.insert_and_match([1, 2, 3, 4], [10, 11, 12, 13], 2)
    tree.lock(short[-1])
    present, long = tree.insert_and_match([1, 2, 3, 4], [10, 11, 12, 13], 4)
    assert present == 2 and [n.value for n in long] == [[], [10, 11], [12, 13]]
    tree.move_lock(short[-1], long[-1])
    assert (short[-1].lock_ref, long[-1].lock_ref) == (1, 1)
    assert (tree.evictable_size, tree.protected_size) == (0, 4)
    tree.check_integrity()
