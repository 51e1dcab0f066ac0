"""The block pool hands out physical ids, reuses the most recently freed first, stays whole."""

import pytest

from sim_core.entities import Request
from sim_core.memory import BlockPool


def request(rid: int) -> Request:
    return Request(rid, 0.0, 10, 5)


def test_fresh_pool_hands_out_ids_in_order_and_reuses_freed_blocks_most_recent_first():
    pool, a, b = BlockPool(8), request(0), request(1)
    assert pool.allocate(a, 3) == [0, 1, 2]
    assert pool.allocate(b, 2) == [3, 4]
    assert pool.free(a) == [0, 1, 2]
    assert pool.num_free == 6 and pool.num_holders == 1
    assert pool.allocate_one(b) == 0       # the freed list is a stack: 0 was pushed last
    assert b.blocks == [3, 4, 0]
    pool.check_integrity([a, b])


def test_can_allocate_is_a_question_not_a_failure():
    pool, a = BlockPool(2), request(0)
    assert pool.can_allocate(2) and not pool.can_allocate(3)
    pool.allocate(a, 2)
    assert not pool.can_allocate(1)
    assert pool.owner_of(1) == 0


def test_integrity_check_catches_a_corrupted_table():
    pool, a = BlockPool(4), request(0)
    pool.allocate(a, 2)
    a.blocks.append(3)  # claims a block it does not own
    with pytest.raises(AssertionError, match="block tables do not match"):
        pool.check_integrity([a])
