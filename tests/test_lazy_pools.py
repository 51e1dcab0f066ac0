"""Block pools hand out ids lazily: exactly the ids and order of a pool that listed every block
up front (the eager models below are the pools as they were written before), with memory that
grows with the blocks used, not with the blocks configured."""

from collections import OrderedDict, deque

from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.entities import Request
from sim_core.memory import BlockPool
from sim_core.memory.block_hash_cache import HashedBlockPool
from sim_core.memory.radix_pool import RadixKvPool
from sim_core.memory.shared_blocks import RefCountedBlockPool

NUM_BLOCKS = 12
OPS = st.lists(st.tuples(st.sampled_from(["allocate", "one", "each", "free"]), st.integers(0, 4),
                         st.integers(1, 5)), max_size=80)


def request(rid: int) -> Request:
    return Request(rid, 0.0, 8, 4)


class EagerStack:
    """The stack as a list of every id: fresh pool [n-1 .. 0], the top (last) handed out first."""

    def __init__(self, num_blocks: int) -> None:
        self.free = list(range(num_blocks - 1, -1, -1))

    def take(self, num: int) -> list[int]:
        if not num:
            return []
        taken = self.free[-num:][::-1]
        del self.free[len(self.free) - num:]
        return taken


def _run_stack_ops(pool, ops) -> None:
    model, requests = EagerStack(NUM_BLOCKS), [request(i) for i in range(5)]
    for op, who, num in ops:
        target = requests[who]
        if op == "free":
            blocks = list(target.blocks)
            assert pool.free(target) == blocks
            model.free.extend(reversed(blocks))
        elif op == "allocate" and len(model.free) >= num:
            assert pool.allocate(target, num) == model.take(num)
        elif op == "one" and target.blocks and model.free:
            assert pool.allocate_one(target) == model.take(1)[0]
        elif op == "each":
            holders = [r for r in requests[:num] if r.blocks]
            if len(model.free) >= len(holders):
                assert pool.allocate_each(holders) == model.take(len(holders))
        assert pool.num_free == len(model.free) and pool.num_used == NUM_BLOCKS - len(model.free)
        pool.check_integrity(requests)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_block_pool_hands_out_exactly_the_ids_of_an_eager_stack(ops):
    """Random allocations and frees: every id handed out, and the free count, match the eager stack."""
    _run_stack_ops(BlockPool(NUM_BLOCKS), ops)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_reference_counted_pool_hands_out_the_same_ids_with_one_reference_each(ops):
    """vllm_v0's pool: the same ids as the eager stack; a held block has one reference, a free one none."""
    pool = RefCountedBlockPool(NUM_BLOCKS)
    _run_stack_ops(pool, ops)
    for block in range(NUM_BLOCKS):
        assert pool.refs_of(block) == (0 if pool.owner_of(block) == -1 else 1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["allocate", "hit", "free"]), st.integers(0, 4), st.integers(1, 4)),
                max_size=80))
def test_hashed_pool_queue_matches_an_eager_queue_of_every_id(ops):
    """vllm_v1's pool: new blocks come off the front of the queue (fresh ids first, in order),
    freed keyed blocks join the back, freed unkeyed ones the front (in the order freed), a hit
    on a free cached block takes it out of the middle: the full queue order equals an eager
    OrderedDict of every id after each step."""
    pool, queue = HashedBlockPool(NUM_BLOCKS, 2), OrderedDict.fromkeys(range(NUM_BLOCKS))
    refs = [0] * NUM_BLOCKS
    requests, next_key = [request(i) for i in range(5)], iter(range(10**6))
    for op, who, num in ops:
        target = requests[who]
        if op == "free":
            unkeyed = []
            for block in reversed(target.blocks):
                refs[block] -= 1
                if not refs[block]:
                    if pool.key_of(block) is None:
                        unkeyed.append(block)
                    else:
                        queue[block] = None
            for block in reversed(unkeyed):
                queue[block] = None
                queue.move_to_end(block, last=False)
            pool.free(target)
        elif op == "allocate" and not target.blocks and len(queue) >= num:
            expected = [queue.popitem(last=False)[0] for _ in range(num)]
            assert pool.allocate(target, num) == expected
            pool.cache_blocks(target, [next(next_key) for _ in range(num)], 2 * num)
            for block in expected:
                refs[block] = 1
        elif op == "hit" and not target.blocks:
            keyed = [pool.key_of(b) for b in range(NUM_BLOCKS) if pool.key_of(b) is not None]
            hits = pool.cached_prefix(keyed[:1])
            if hits and pool.can_allocate(1, hits):
                for block in hits:
                    queue.pop(block, None)
                    refs[block] += 1
                fresh = queue.popitem(last=False)[0]
                refs[fresh] = 1
                assert pool.allocate(target, 1, hits) == [*hits, fresh]
        assert pool.free_order() == list(queue)
        pool.check_integrity(requests)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["allocate", "free"]), st.integers(0, 4), st.integers(1, 5)),
                max_size=80))
def test_radix_pool_free_list_matches_an_eager_deque_of_every_id(ops):
    """sglang's pool without caching: blocks come off the front (fresh ids first, in order) and
    freed ones join the back, exactly as a deque of every id would do."""
    pool, model = RadixKvPool(NUM_BLOCKS, 1, caching=False), deque(range(NUM_BLOCKS))
    requests = [request(i) for i in range(5)]
    for op, who, num in ops:
        target = requests[who]
        if op == "free":
            blocks = list(target.blocks)
            pool.free(target)
            model.extend(blocks)
        elif len(model) >= num:
            if not target.blocks:
                pool.admit(target, [], pool.tree.root)
            assert pool.allocate(target, num) == [model.popleft() for _ in range(num)]
        assert pool.num_free_list == len(model)
        pool.check_integrity([r for r in requests if r.blocks])


def test_a_pool_of_a_billion_blocks_hands_out_0_1_2_and_reuses_the_last_freed():
    """A 10^9-block pool behaves like any other: fresh ids in order, the most recently freed first."""
    pool, a, b = BlockPool(10**9), request(0), request(1)
    assert pool.allocate(a, 3) == [0, 1, 2]
    assert pool.allocate(b, 1) == [3]
    pool.free(a)
    assert pool.allocate(b, 2) == [0, 1] and pool.allocate_one(b) == 2 and pool.allocate_one(b) == 4
    assert pool.num_free == 10**9 - 5 and pool.owner_of(999_999_999) == -1
    pool.check_integrity([a, b])
