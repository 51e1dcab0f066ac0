"""A fast-forwarded run's block events grouped per slot (engine/run_replay.py) and the hashed
pool's one-call growth they rely on (memory/block_hash_cache.py `allocate_each`)."""

from dataclasses import dataclass

from sim_core.engine.run_replay import run_events
from sim_core.entities import Request
from sim_core.memory.block_hash_cache import HashedBlockPool


@dataclass
class Growth:
    """The figures of a policy's promise that run_events reads (vllm_v1's: paged growth, async
    steps, a prefix cache that keys blocks)."""

    block_size: int = 4
    lead: int = 1
    growth: str = "paged"
    keys_blocks: bool = True


def member(rid: int, processed: int, blocks: int) -> Request:
    request = Request(rid, 0.0, 64, 64)
    request.num_processed_tokens, request.num_blocks = processed, blocks
    return request


def test_run_events_lists_each_slots_frees_growth_and_keys_in_batch_order():
    """Blocks of 4, async steps (formation f at slot f - 1), a run of k = 7 (slots 1..6,
    formations 2..7). Member 0 holds 6 tokens in 2 blocks, 10 iterations left: it outgrows its
    8 slots at formations 3 and 7 (first growth 4*2 + 1 - 6 = 3, then every 4), and formation f
    counts 6 + f - 1 tokens, a multiple of 4 at f = 3 and 7: slots 2 and 6, a block then its key.
    Member 1 holds 9 tokens in 3 blocks, 5 left: it grows at formation 12 + 1 - 9 = 4, whose 12
    tokens key it (slot 3), is in no later formation (its last token in flight) and finishes
    after iteration 4 (freed at slot 5). Member 2 holds 1 token in 1 block, 20 left: grows at
    formation 4 + 1 - 1 = 4 and keys it there (1 + 4 - 1 = 4 tokens), next at 8 = k + lead,
    past the run. Slots 1 and 4 have nothing."""
    members = [member(0, 6, 2), member(1, 9, 3), member(2, 1, 1)]
    assert run_events(Growth(), members, [10, 5, 20], 7) == [
        (2, [], [0], [0]), (3, [], [1, 2], [1, 2]), (5, [1], [], []), (6, [], [0], [0])]


def test_serial_steps_without_a_cache_list_only_frees_and_growth():
    """Serial steps (lead 0: formation f at slot f), no keys: member 0 (6 tokens, 2 blocks, 3
    left) grows at formation 3, past its last formation 2, so never; it finishes after
    iteration 2 (freed at slot 3). Member 1 (8 tokens, 2 blocks, 9 left) grows at formation
    8 + 1 - 8 = 1 and 5; a run of k = 4 holds formations 1..3."""
    members = [member(0, 6, 2), member(1, 8, 2)]
    growth = Growth(lead=0, keys_blocks=False)
    assert run_events(growth, members, [3, 9], 4) == [(1, [], [1], []), (3, [0], [], [])]


def test_allocate_each_takes_freed_then_fresh_then_cached_blocks():
    """3 blocks of 2 tokens. A takes 0 and keys it; B takes 1 (unkeyed). Both free: the queue
    is 1 (unkeyed, front), 2 (fresh), 0 (cached). One call gives C, D, C a block each: 1, 2,
    then 0, whose key is dropped, as three allocate(request, 1) calls would."""
    pool = HashedBlockPool(3, 2)
    a, b, c, d = (member(i, 0, 0) for i in range(4))
    pool.allocate(a, 1)
    pool.cache_blocks(a, [50], 2)
    pool.allocate(b, 1)
    pool.free(a)
    pool.free(b)
    assert pool.free_order() == [1, 2, 0]
    assert pool.allocate_each([c, d, c]) == [1, 2, 0]
    assert (c.blocks, d.blocks, pool.num_holders, pool.num_free) == ([1, 0], [2], 2, 0)
    assert pool.key_of(0) is None and pool.cached_prefix([50]) == []
    pool.check_integrity([c, d])


def test_keying_before_or_after_an_eviction_of_the_same_key_leaves_the_same_index():
    """What run_replay's grouping relies on: block 0 is free and cached with key 7; B holds
    block 1 and its key is 7 too. Stepwise B keys first (block 1 waits as a later holder), then
    C's allocation evicts block 0 and block 1 takes the key's place; grouped, the eviction
    comes first and B's keying finds the key unheld. Either way key 7 names block 1 alone."""
    results = []
    for key_first in (True, False):
        pool = HashedBlockPool(2, 2)
        a, b, c = member(0, 0, 0), member(1, 0, 0), member(2, 0, 0)
        pool.allocate(a, 1)
        pool.cache_blocks(a, [7], 2)
        pool.allocate(b, 1)
        pool.free(a)
        if key_first:
            pool.cache_blocks(b, [7], 2)
            pool.allocate_each([c])
        else:
            pool.allocate_each([c])
            pool.cache_blocks(b, [7], 2)
        pool.check_integrity([b, c])
        results.append((pool.cached_prefix([7]), pool.key_of(0), pool.key_of(1), c.blocks))
    assert results[0] == results[1] == ([1], None, 7, [0])
