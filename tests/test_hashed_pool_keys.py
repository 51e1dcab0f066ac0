"""HashedBlockPool.cache_blocks keys a request's filled blocks the same whether it is asked one
block at a time (its one-block path, vllm_v1's usual call) or for several at once."""

from hypothesis import given
from hypothesis import strategies as st

from sim_core.entities import Request
from sim_core.memory.block_hash_cache import HashedBlockPool

BLOCK_SIZE = 4


def _request(rid: int) -> Request:
    return Request(rid, 0.0, 8, 4)


def _state(pool: HashedBlockPool) -> tuple:
    return ([pool.key_of(b) for b in range(pool.next_fresh)], dict(pool._by_key),
            {key: list(blocks) for key, blocks in pool._more.items()}, dict(pool.keyed))


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6), st.lists(st.integers(0, 3), min_size=6, max_size=6)),
                min_size=1, max_size=6))
def test_one_block_at_a_time_keys_as_all_at_once(rows):
    """Each row: a request taking `num` blocks whose keys come from a 4-key alphabet (so blocks
    often hold a key already held: the later holders' index). Pool A keys each request's blocks
    one call per block, pool B in one call; the keys, the key index, the later holders and the
    keyed counts agree after every row, and A's calls return, together, what B's call returns."""
    one, many = HashedBlockPool(64, BLOCK_SIZE), HashedBlockPool(64, BLOCK_SIZE)
    for rid, (who, num, key_ids) in enumerate(rows):
        keys = [who * 10 + k for k in key_ids]   # a request's keys depend on `who`: rows of one `who` share
        a, b = _request(rid), _request(rid)
        one.allocate(a, num)
        many.allocate(b, num)
        singly = [block for filled in range(1, num + 1) for block in one.cache_blocks(a, keys, filled * BLOCK_SIZE)]
        assert singly == many.cache_blocks(b, keys, num * BLOCK_SIZE)
        assert _state(one) == _state(many)
        one.check_integrity()
