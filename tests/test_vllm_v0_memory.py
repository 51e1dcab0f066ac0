"""vllm_v0's memory parts: the reference-counted pool, CPU swap space, KV copy prices, and the
virtual engines that split a replica's blocks with pipeline parallelism."""

import pytest
from conftest import batches_of, cost, scenario, workload
from test_vllm_v0 import run

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.entities import Request
from sim_core.memory.cache_ops import COPY, SWAP_IN
from sim_core.memory.shared_blocks import RefCountedBlockPool, RefCountedCountingPool
from sim_core.memory.swap_space import SwapSpace, kv_block_bytes, num_swap_blocks
from sim_core.predictor.kv_copy import KvCopyCost


def test_a_fork_shares_every_block_and_copy_on_write_moves_one_reference():
    """Request 7 holds blocks 0 and 1; forking 3 sequences gives both 3 references; two
    sequences copy block 1 (new blocks 2, 3), which keeps one reference; freeing the request
    returns all four blocks, most recently allocated first."""
    pool, request = RefCountedBlockPool(6), Request(7, 0.0, 6, 4)
    assert pool.allocate(request, 2) == [0, 1]
    pool.add_refs(request.blocks, 2)
    assert [pool.refs_of(b) for b in range(3)] == [3, 3, 0]
    tables = [[0, 1], [0, 1], [0, 1]]
    pool.check_integrity([request], {7: tables})
    tables[0][-1], tables[1][-1] = pool.copy_on_write(request, 1), pool.copy_on_write(request, 1)
    assert tables == [[0, 2], [0, 3], [0, 1]] and [pool.refs_of(b) for b in range(4)] == [3, 1, 1, 1]
    pool.check_integrity([request], {7: tables})
    assert pool.free(request) == [0, 1, 2, 3] and pool.num_free == 6
    assert pool.allocate(Request(8, 0.0, 1, 1), 1) == [0]


def test_integrity_catches_a_refcount_that_disagrees_with_the_tables():
    pool, request = RefCountedBlockPool(4), Request(1, 0.0, 8, 4)
    pool.allocate(request, 2)
    pool.add_refs([0], 1)
    with pytest.raises(AssertionError, match="refcount != table references"):
        pool.check_integrity([request], {1: [[0, 1], [1]]})     # block 0 is listed once, counted twice
    with pytest.raises(AssertionError, match="refcount != table references"):
        pool.check_integrity([request])                          # without tables every count must be 1


def test_the_counting_pool_counts_a_copy_as_one_more_block():
    pool, request = RefCountedCountingPool(5), Request(1, 0.0, 8, 4)
    pool.allocate(request, 2)
    pool.add_refs([], 2)
    assert pool.copy_on_write(request, -1) == -1 and (request.num_blocks, pool.num_free) == (3, 2)
    pool.check_integrity([request])


def test_swap_space_holds_blocks_per_request_until_released():
    swap = SwapSpace(10)
    assert swap.can_swap_out(10) and not swap.can_swap_out(11)
    swap.swap_out(3, 6)
    assert not swap.can_swap_out(5) and swap.num_free == 4
    assert swap.release(3) == 6 and swap.num_free == 10
    swap.check_integrity()


def test_block_bytes_swap_blocks_and_copy_prices_follow_the_model_device_and_parallelism():
    """Llama-2-7B, 16-token blocks: 2 x 16 x 128 x 32 heads x 32 layers x 2 bytes = 8 MiB per
    GPU; TP 2 halves the heads, PP 2 the layers. 4 GiB of swap holds 512 such blocks. A100
    PCIe Gen4 moves one in 8 MiB / 32 GB/s; H100's Gen5 twice as fast; a copy reads and writes
    it at the HBM bandwidth. A policy without swap space (vllm) has no CPU blocks."""
    config = parse_config({"scheduler": {"type": "vllm_v0"}})
    assert kv_block_bytes(config) == 8 * 1024**2 and num_swap_blocks(config) == 512
    assert num_swap_blocks(parse_config({})) == 0
    split = parse_config({"cluster": {"tensor_parallel_size": 2, "pipeline_parallel_size": 2}})
    assert kv_block_bytes(split) == 2 * 1024**2
    cost_a100 = KvCopyCost.from_config(config)
    assert cost_a100.seconds(SWAP_IN, 10) == 10 * (8 * 1024**2 / 32e9)
    assert cost_a100.seconds(COPY, 1) == 2 * 8 * 1024**2 / 2039e9
    assert KvCopyCost.from_config(parse_config({"device": "h100-sxm"})).seconds(SWAP_IN, 1) == 8 * 1024**2 / 64e9
    assert num_swap_blocks(parse_config({"scheduler": {"type": "vllm_v0", "swap_space_gb": 0.0}})) == 0


def test_a_swap_out_that_finds_the_swap_space_full_recomputes():
    """The A/B scenario of test_vllm_v0 with no swap space: B cannot be swapped, so it is
    recomputed (restarted) exactly as in recompute mode."""
    full = run([(0.0, 8, 10), (0.0, 8, 10)], num_blocks=6, watermark_blocks_fraction=0.17,
               preemption_mode="swap", swap_space_gb=0.0)
    recompute = run([(0.0, 8, 10), (0.0, 8, 10)], num_blocks=6, watermark_blocks_fraction=0.17,
                    preemption_mode="recompute")
    assert batches_of(full) == batches_of(recompute)
    assert full.requests["num_restarts"].tolist() == [0, 1] and not len(full.cache_ops)


def test_pipeline_stages_run_virtual_engines_with_their_own_blocks():
    """PP = 2: two virtual engines of 4 blocks each (engine 1's ids are 4..7). Two requests at
    t = 0 go to engine 0, then engine 1 (fewest unfinished); each engine keeps one batch in
    flight, so both prompts start at once and cross the two stages one behind the other."""
    config = scenario("vllm_v0", scheduler={"block_size": 4, "num_blocks": 8},
                      cluster={"num_replicas": 1, "pipeline_parallel_size": 2})
    result = run_simulation(parse_config(config), workload((0.0, 8, 2), (0.0, 8, 2)))
    c8 = cost(8)
    stages = result.batch_stages
    assert list(zip(stages["batch_id"], stages["stage_id"], stages["start"].round(9), stages["end"].round(9)))[:5] == [
        (0, 0, 0.0, round(c8, 9)), (1, 0, round(c8, 9), round(2 * c8, 9)), (0, 1, round(c8, 9), round(2 * c8, 9)),
        (2, 0, round(2 * c8, 9), round(2 * c8 + cost(1), 9)),   # engine 0's decode while engine 1's prompt
        (1, 1, round(2 * c8, 9), round(3 * c8, 9))]             # is on stage 1
    allocations = result.block_events[result.block_events["delta"] == 1]
    assert allocations.groupby("request")["block"].apply(list).to_dict() == {0: [0, 1, 2], 1: [4, 5, 6]}
    assert batches_of(result)[:3] == [(0.0, [0], [8]), (0.0, [1], [8]), (round(2 * c8, 9), [0], [1])]


def test_virtual_engines_need_a_block_each():
    config = scenario("vllm_v0", scheduler={"num_blocks": 1}, cluster={"num_replicas": 1, "pipeline_parallel_size": 2})
    with pytest.raises(ConfigError, match="scheduler.num_blocks: vllm_v0 splits the 1 KV blocks over 2 virtual"):
        run_simulation(parse_config(config), workload((0.0, 8, 2)))
