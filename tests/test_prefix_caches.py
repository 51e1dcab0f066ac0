"""The two prefix caches on their own: SGLang's radix tree and vLLM v1's block-hash pool."""

from sim_core.entities import Request
from sim_core.memory.block_hash_cache import HashedBlockPool
from sim_core.memory.radix_cache import RadixCache
from sim_core.memory.radix_pool import RadixKvPool


def request(rid: int) -> Request:
    return Request(rid, 0.0, 8, 4)


# ---- radix tree ----------------------------------------------------------------------------


def test_match_returns_the_longest_cached_prefix_and_splits_the_edge_where_it_ends():
    """[1 2 3 4] is cached; [1 2 3 9] matches 3 keys, which splits the edge into [1 2 3] + [4]."""
    tree = RadixCache()
    assert tree.insert([1, 2, 3, 4], [10, 11, 12, 13]) == 0
    values, node = tree.match_prefix([1, 2, 3, 9])
    assert values == [10, 11, 12] and node.key == [1, 2, 3]
    assert [child.key for child in node.children.values()] == [[4]]
    assert tree.match_prefix([7])[0] == [] and tree.match_prefix([])[0] == []
    tree.check_integrity()


def test_insert_reports_how_much_was_already_cached_and_keeps_the_first_blocks():
    """Inserting [1 2 5 6] over [1 2 3 4] finds 2 keys present: they keep blocks 10 and 11, and
    only 5 and 6 add blocks (22, 23); the caller frees its own 20 and 21."""
    tree = RadixCache()
    tree.insert([1, 2, 3, 4], [10, 11, 12, 13])
    assert tree.insert([1, 2, 5, 6], [20, 21, 22, 23]) == 2
    assert tree.match_prefix([1, 2, 5, 6])[0] == [10, 11, 22, 23]
    assert sorted(tree.blocks()) == [10, 11, 12, 13, 22, 23]
    assert (tree.evictable_size, tree.protected_size) == (6, 0)
    tree.check_integrity()


def test_locked_paths_are_never_evicted_and_parents_go_after_their_last_child():
    """With [1 2 5 6] locked, only the [3] and [4] branch can go: [4] first (a leaf), then [3]
    once it has become a leaf; [1 2] is on the locked path. After unlocking, [5 6] goes, then
    its parent [1 2]."""
    tree = RadixCache()
    tree.insert([1, 2, 3, 4], [10, 11, 12, 13])
    tree.insert([1, 2, 5, 6], [20, 21, 22, 23])
    tree.match_prefix([1, 2, 3])                    # splits [3 4] into [3] + [4]
    _, node = tree.match_prefix([1, 2, 5, 6])
    tree.lock(node)
    assert (tree.evictable_size, tree.protected_size) == (2, 4)
    assert tree.evict(1) == [13]
    assert tree.evict(5) == [12]                     # nothing else is unlocked
    tree.check_integrity()
    tree.unlock(node)
    assert tree.evict(10) == [22, 23, 10, 11]
    assert tree.blocks() == [] and (tree.evictable_size, tree.protected_size) == (0, 0)
    tree.check_integrity()


def test_eviction_takes_the_least_recently_used_leaf_first():
    """Leaves A, B, C inserted in that order; matching A makes it the most recent: eviction
    order is B, C, A (whole leaves, even when fewer blocks were asked for)."""
    tree = RadixCache()
    tree.insert([1, 2], [0, 1])      # A
    tree.insert([3, 4], [2, 3])      # B
    tree.insert([5], [4])            # C
    tree.match_prefix([1, 2])
    assert tree.evict(1) == [2, 3]
    assert tree.evict(1) == [4]
    assert tree.evict(1) == [0, 1]
    assert tree.evict(1) == []


def test_eviction_order_holds_after_many_touches_of_the_same_leaves():
    """Leaves A [1] and B [2] are matched in turn 1,500 times each, A last: each touch leaves
    an outdated entry behind in the eviction heap (more than the 1,024 it tolerates, so it is
    rebuilt on the way). B is still the least recently used: it goes first, then A."""
    tree = RadixCache()
    tree.insert([1], [10])
    tree.insert([2], [20])
    for _ in range(1500):
        tree.match_prefix([2])
        tree.match_prefix([1])
    tree.check_integrity()
    assert tree.evict(1) == [20]
    assert tree.evict(1) == [10]
    tree.check_integrity()


def test_insert_and_match_walks_once_as_insert_then_match():
    """[1 2 3 4] cached, then [1 2 5] inserted and matched: 2 keys were present, the path
    holds blocks 10 11 22 and ends at the new leaf [5]; the edge [3 4] was split at [1 2].
    The touches equal insert + match_prefix: [1 2 5] is the most recent, so eviction takes
    [3 4] first, then [5], then [1 2]."""
    tree = RadixCache()
    tree.insert([1, 2, 3, 4], [10, 11, 12, 13])
    present, path = tree.insert_and_match([1, 2, 5, 7], [20, 21, 22, 23], 3)   # the first 3 keys
    assert (present, [node.value for node in path], path[-1].key) == (2, [[], [10, 11], [22]], [5])
    tree.check_integrity()
    assert tree.evict(1) == [12, 13]
    assert tree.evict(1) == [22]
    assert tree.evict(1) == [10, 11]


def test_two_holders_lock_a_shared_path_twice():
    tree = RadixCache()
    tree.insert([1, 2, 3], [5, 6, 7])
    _, short = tree.match_prefix([1, 2])
    _, long = tree.match_prefix([1, 2, 3])
    tree.lock(short)
    tree.lock(long)
    assert (short.lock_ref, long.lock_ref) == (2, 1)
    assert tree.evict(9) == []
    tree.unlock(long)
    assert tree.evict(9) == [7]
    tree.unlock(short)
    tree.check_integrity()


# ---- SGLang's pool: free list + tree --------------------------------------------------------


def test_radix_pool_shares_a_cached_prefix_and_frees_duplicates_on_insert():
    """Pool of 8 blocks. Request 0 computes keys [a b c] into blocks 0 1 2 and caches them.
    Request 1 matches [a b] (blocks 0 1, locked) and takes private block 3. Request 2, admitted
    with no match, computes [a b c d] itself in blocks 4 5 6 7: when it caches, the tree already
    has [a b c], so its 3 duplicates are freed and its table points at 0 1 2, then its own 7."""
    pool = RadixKvPool(8, 1, caching=True)
    first, second, third = request(0), request(1), request(2)
    pool.admit(first, [], pool.tree.root)
    assert pool.allocate(first, 3) == [0, 1, 2]
    pool.insert(first, ["a", "b", "c"], 3)
    hits, node = pool.match(["a", "b"])
    pool.lock(node)
    pool.admit(second, hits, node)
    assert pool.allocate(second, 1) == [3] and second.blocks == [0, 1, 3]
    pool.admit(third, [], pool.tree.root)
    assert pool.allocate(third, 4) == [4, 5, 6, 7]
    pool.insert(third, ["a", "b", "c", "d"], 4)
    assert third.blocks == [0, 1, 2, 7]
    assert pool.num_free_list == 3 and list(pool._free) == [4, 5, 6]
    pool.check_integrity([first, second, third])
    pool.free(first)
    pool.free(second)
    pool.free(third)
    assert (pool.tree.evictable_size, pool.num_free_list) == (4, 4)   # a b c d cached, unlocked
    pool.check_integrity([])


def test_radix_pool_evicts_lru_leaves_when_the_free_list_runs_short():
    """[x y z] cached in blocks 0 1 2, unlocked, and split by a match into [x] + [y z]: a
    request needing 3 blocks with 1 free evicts the leaf [y z] (blocks 1 2) onto the back of the
    free list, then takes the front 3; [x] stays cached."""
    pool = RadixKvPool(4, 1, caching=True)
    old, new = request(0), request(1)
    pool.admit(old, [], pool.tree.root)
    pool.allocate(old, 3)
    pool.insert(old, ["x", "y", "z"], 3)
    pool.free(old)
    pool.match(["x"])                     # [x] becomes the most recent once split off
    pool.admit(new, [], pool.tree.root)
    assert pool.allocate(new, 3) == [3, 1, 2]
    assert pool.tree.blocks() == [0]
    pool.check_integrity([new])


# ---- vLLM v1's block-hash pool ------------------------------------------------------------


def test_freed_blocks_stay_hits_until_the_queue_hands_them_out_again():
    """4 blocks of 2 tokens. A caches keys k0 k1 in blocks 0 1 and finishes: freed last block
    first, so the queue is 2 3 1 0. B hits both and takes block 2 new. B finishes: block 2, never
    keyed, goes to the front (it can never be a hit), 1 and 0 to the back. Then C takes 2 and 3,
    then 1: block 1 is evicted (its key dropped), so a later lookup hits only block 0."""
    pool = HashedBlockPool(4, 2)
    a, b, c = request(0), request(1), request(2)
    assert pool.allocate(a, 2) == [0, 1]
    assert pool.cache_blocks(a, [100, 101], 4) == [0, 1]
    pool.free(a)
    assert pool.free_order() == [2, 3, 1, 0]
    hits = pool.cached_prefix([100, 101, 102])
    assert hits == [0, 1] and pool.can_allocate(1, hits) and not pool.can_allocate(3, hits)
    assert pool.allocate(b, 1, hits) == [0, 1, 2]
    assert pool.free_order() == [3]
    pool.free(b)
    assert pool.free_order() == [2, 3, 1, 0]
    assert pool.allocate(c, 2) == [2, 3]
    assert pool.allocate(c, 1) == [1]
    assert pool.key_of(1) is None and pool.cached_prefix([100, 101]) == [0]
    pool.check_integrity([c])


def test_a_shared_block_is_referenced_once_per_holder():
    pool = HashedBlockPool(3, 4)
    a, b = request(0), request(1)
    pool.allocate(a, 1)
    pool.cache_blocks(a, [7], 4)
    pool.allocate(b, 1, pool.cached_prefix([7]))
    assert (a.blocks, b.blocks, pool.ref_count(0)) == ([0], [0, 1], 2)
    pool.check_integrity([a, b])
    pool.free(a)
    assert pool.ref_count(0) == 1 and pool.free_order() == [2]
    pool.check_integrity([b])


def test_only_full_blocks_get_keys_and_partial_ones_later():
    """5 tokens in blocks of 2 fill 2 blocks; after 2 more tokens the third gets its key. The
    pool counts the leading keyed blocks of a table (none before, 2, then 3)."""
    pool = HashedBlockPool(4, 2)
    a = request(0)
    pool.allocate(a, 3)
    assert pool.num_keyed(a) == 0
    assert pool.cache_blocks(a, [1, 2, 3], 5) == [0, 1]
    assert pool.num_keyed(a) == 2
    assert pool.cache_blocks(a, [1, 2, 3], 6) == [2]
    assert pool.num_keyed(a) == 3
    assert pool.num_cached_free() == 0
    pool.free(a)
    assert pool.num_cached_free() == 3


def test_keying_no_further_than_the_keyed_count_changes_nothing():
    """vllm_v1 calls cache_blocks only when a request's tokens fill a block past `keyed` (its
    leading keyed blocks per request id): below that a call returns no block and changes
    nothing. Blocks of 2: 5 tokens key 2 blocks; 4 and 5 tokens again key none; the entry goes
    with the request's free."""
    pool = HashedBlockPool(4, 2)
    a = request(0)
    pool.allocate(a, 3)
    assert pool.cache_blocks(a, [1, 2, 3], 5) == [0, 1]
    assert pool.keyed == {0: 2}
    assert pool.cache_blocks(a, [1, 2, 3], 4) == []
    assert pool.cache_blocks(a, [1, 2, 3], 5) == []
    assert pool.keyed == {0: 2} and [pool.key_of(b) for b in range(3)] == [1, 2, None]
    pool.free(a)
    assert pool.keyed == {}


# ---- block keys from the workload's prefix columns ------------------------------------------


def _keys(block_size: int, **columns):
    import numpy as np

    from sim_core.memory.prefix_keys import PrefixKeys
    from sim_core.workload import Workload

    prompt, output = columns.pop("prompt"), columns.pop("output")
    n = len(prompt)
    hashes = columns.pop("hashes", None)
    if hashes is not None:
        columns["hash_ids"] = np.array([h for row in hashes for h in row], dtype=np.int64)
        columns["hash_offsets"] = np.concatenate(([0], np.cumsum([len(row) for row in hashes]))).astype(np.int64)
        columns["hash_block_size"] = 4
    workload = Workload(np.zeros(n), np.array(prompt), np.array(output), "t",
                        **{k: (np.array(v) if isinstance(v, list) else v) for k, v in columns.items()})
    keys = PrefixKeys(workload, block_size)
    return [keys.block_keys(row) for row in range(n)]


def test_a_group_prefix_is_shared_up_to_the_shorter_prefix_len():
    """Blocks of 4: group 5 prefixes of 8 and 12 tokens share 2 blocks; the third block of row 0
    holds its own tokens. Row 2 (group -1) and row 3 (another group) share nothing."""
    a, b, c, d = _keys(4, prompt=[12, 12, 12, 12], output=[4, 4, 4, 4], prefix_group=[5, 5, -1, 6],
                       prefix_len=[8, 12, 12, 12])
    assert len(a) == 4 and a[:2] == b[:2] and a[2] != b[2]
    assert not set(c) & set(a + b) and not set(d) & set(a + b + c)


def test_a_session_turn_extends_the_previous_turn_including_its_output():
    """Turn 0: 8-token prompt + 4 outputs (3 blocks of 4). Turn 1's first 12 tokens are that
    whole conversation (prefix_len 12), so its first 3 keys are turn 0's 3 keys."""
    turn0, other, turn1 = _keys(4, prompt=[8, 8, 20], output=[4, 4, 2], session_id=[3, 4, 3],
                                prefix_len=[0, 0, 12])
    assert turn1[:3] == turn0 and turn1[3] not in turn0
    assert not set(other) & set(turn0)


def test_mooncake_hash_ids_decide_equal_blocks():
    """Hash blocks of 4 tokens, cache blocks of 2: rows with hashes [5 6] and [5 7] share the
    two cache blocks of hash 5 only; the keys chain, so block 3 differs although it sits at the
    same place."""
    a, b = _keys(2, prompt=[8, 8], output=[2, 2], hashes=[[5, 6], [5, 7]])
    assert a[:2] == b[:2] and a[2] != b[2] and a[3] != b[3]


def test_a_prefix_len_without_a_group_or_session_shares_nothing():
    a, b = _keys(4, prompt=[8, 8], output=[1, 1], prefix_len=[8, 8])
    assert not set(a) & set(b)


def test_a_key_held_by_two_blocks_hits_the_oldest_until_it_is_evicted():
    """Requests a and b both compute the content of key 9 (neither was cached when the other
    started): a's block 0 is keyed first, b's block 1 second. A lookup gives block 0; once
    both are freed (a first: queue [0, 1] behind the never-used [2]) and c takes 2 new blocks
    (2, then the front of the cached ones, 0: evicted), key 9 leads to block 1."""
    pool = HashedBlockPool(3, 4)
    a, b, c = request(0), request(1), request(2)
    pool.allocate(a, 1)
    pool.allocate(b, 1)
    pool.cache_blocks(a, [9], 4)
    pool.cache_blocks(b, [9], 4)
    assert pool.cached_prefix([9]) == [0]
    pool.check_integrity([a, b])
    pool.free(a)
    pool.free(b)
    assert pool.free_order() == [2, 0, 1]
    assert pool.allocate(c, 2) == [2, 0]
    assert pool.key_of(0) is None and pool.cached_prefix([9, 10]) == [1]
    pool.check_integrity([c])


def test_a_hit_on_a_free_block_leaves_the_queue_order_of_the_others():
    """Blocks 0-3 of a are freed, keyed, last first: queue [3, 2, 1, 0]. b hits blocks 0-1 (its
    prefix), so the queue is [3, 2]; b frees them again, last first: [3, 2, 1, 0]. c takes 3
    blocks: 3, 2, 1 (evicted in that order), and the hit block 0 is still cached."""
    pool = HashedBlockPool(4, 1)
    a, b, c = request(0), request(1), request(2)
    pool.allocate(a, 4)
    pool.cache_blocks(a, [10, 11, 12, 13], 4)
    pool.free(a)
    assert pool.free_order() == [3, 2, 1, 0]
    pool.allocate(b, 0, pool.cached_prefix([10, 11, 99]))
    assert pool.free_order() == [3, 2] and pool.num_free == 2
    pool.check_integrity([b])
    pool.free(b)
    assert pool.free_order() == [3, 2, 1, 0]
    assert pool.allocate(c, 3) == [3, 2, 1]
    assert pool.cached_prefix([10, 11]) == [0] and pool.num_free == 1
    pool.check_integrity([c])


def test_many_hits_on_free_blocks_keep_the_queue_exact():
    """1,500 rounds of: a request hits the 2 cached blocks of a 3-block pool and frees them
    (block 1 then 0 to the back of the queue, behind the never-used block 2). The entries the
    hits leave behind are dropped on the way (more than the pool's 1,024 tolerated ones), the
    queue stays [2, 1, 0], and a request taking all 3 blocks evicts 1 then 0."""
    pool = HashedBlockPool(3, 1)
    first = request(0)
    pool.allocate(first, 2)
    pool.cache_blocks(first, [5, 6], 2)
    pool.free(first)
    for rid in range(1, 1501):
        hitter = request(rid)
        pool.allocate(hitter, 0, pool.cached_prefix([5, 6]))
        pool.free(hitter)
        assert pool.free_order() == [2, 1, 0]
    pool.check_integrity([])
    last = request(2000)
    assert pool.allocate(last, 3) == [2, 1, 0]
    assert pool.cached_prefix([5]) == [] and pool.num_free == 0
    pool.check_integrity([last])


def test_a_turn_takes_its_earlier_turns_keys_as_if_hashed_again():
    """Blocks of 4. Turn 0 (row 0): 10-token prompt + 6 outputs, 4 blocks. Turn 1 (row 2) copies
    the first 14 tokens (prefix_len 14): its blocks 0-2 lie inside them and are turn 0's keys;
    block 3 holds copied tokens 12-13 and its own 14-15. Keys made in row order (turn 1 takes
    turn 0's kept keys) equal keys made by a fresh PrefixKeys for turn 1 alone."""
    import numpy as np

    from sim_core.memory.prefix_keys import PrefixKeys
    from sim_core.workload import Workload

    workload = Workload(np.zeros(3), np.array([10, 8, 20]), np.array([6, 4, 4]), "t",
                        session_id=np.array([3, 4, 3]), prefix_len=np.array([0, 0, 14]))
    in_order = PrefixKeys(workload, 4)
    turn0 = in_order.block_keys(0)
    turn1 = in_order.block_keys(2)
    alone = PrefixKeys(workload, 4).block_keys(2)
    assert turn1 == alone and len(turn1) == 6
    assert turn1[:3] == turn0[:3] and turn1[3] != turn0[3]
