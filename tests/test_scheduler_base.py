"""The scheduler base's surface, each policy's pool, the cluster-facing endpoint and the
fast-forward promise, on schedulers built directly (no simulator)."""

from conftest import scenario, workload

from sim_core import parse_config
from sim_core.entities import Request
from sim_core.memory.block_hash_cache import HashedBlockPool
from sim_core.memory.block_pool import BlockPool, CountingBlockPool
from sim_core.memory.radix_pool import RadixKvPool
from sim_core.memory.shared_blocks import RefCountedBlockPool
from sim_core.results.record import Recorder
from sim_core.schedulers import SCHEDULERS, ReplicaLimits, ReplicaScheduler
from sim_core.schedulers.base import UNBOUNDED
from sim_core.schedulers.vllm_v0_pipeline import PoolsView


def build(policy, num_stages=1, record="full", num_blocks=8, **knobs):
    """Replica 0 of `policy` with `num_blocks` KV blocks of 16 tokens."""
    config = parse_config(scenario(policy, scheduler={"num_blocks": num_blocks, **knobs}))
    limits = ReplicaLimits(num_blocks, 8, config.max_model_len // 16, config.max_model_len, 0)
    return SCHEDULERS[policy](0, num_stages, config.scheduler, limits, Recorder(record, 1))


def test_the_base_shows_the_simulator_its_queues_lifecycle_and_two_companions_only():
    """The base has 13 public members (a policy adds its `traits`: 14); the rest are `_` hooks."""
    config = parse_config(scenario()).scheduler
    scheduler = ReplicaScheduler(0, 1, config, ReplicaLimits(8, 8, 128), Recorder("full", 1))
    public = {name for name in dir(scheduler) if not name.startswith("_")}
    assert public == {"replica_id", "num_stages", "config", "pool", "waiting", "running",
                      "num_batches", "add_request", "on_schedule", "on_batch_end", "check_integrity", "endpoint",
                      "steady_decode"}


def test_each_policy_builds_its_own_kind_of_pool_once():
    """The pool comes from the policy's `_make_pool`: ids tracked only when block events are kept."""
    assert type(build("vllm").pool) is BlockPool
    assert type(build("vllm", record="batches").pool) is CountingBlockPool
    assert type(build("vllm_v1", enable_prefix_caching=True).pool) is HashedBlockPool
    assert type(build("vllm_v1", enable_prefix_caching=False).pool) is BlockPool
    assert type(build("vllm_v0").pool) is RefCountedBlockPool
    assert type(build("sglang").pool) is RadixKvPool
    pipeline = build("vllm_v0", num_stages=2)
    assert type(pipeline.pool) is PoolsView and pipeline.pool.num_blocks == 8


def test_a_prefill_replica_refuses_only_prompts_it_cannot_hold():
    """vllm_v1 with 8 blocks of 16 tokens: a 40-token prompt with 100 outputs peaks at 9 blocks,
    too many for a whole replica or a decode replica, but a prefill replica holds only the prompt
    and its first token."""
    work = workload((0.0, 40, 100))
    whole, prefill = build("vllm_v1"), build("vllm_v1")
    whole.endpoint.join("replicas", work)
    prefill.endpoint.join("prefill", work)
    assert whole.endpoint.rejection_reason(40, 100) == (
        "at its longest it needs 9 KV blocks but the replica has 8 (vLLM needs the KV cache to hold a whole request)")
    assert prefill.endpoint.rejection_reason(40, 100) is None


def test_an_sglang_decode_replica_trades_its_radix_cache_for_a_chunk_cache():
    """Joining the decode pool turns prefix caching off and gives the replica a fresh chunk-cache
    pool; the same policy in the prefill pool keeps its radix tree."""
    work = workload((0.0, 40, 10))
    prefill, decode = build("sglang"), build("sglang")
    prefill.endpoint.join("prefill", work)
    decode.endpoint.join("decode", work)
    assert prefill.pool.caching and not decode.pool.caching
    assert decode.endpoint.role == "decode" and decode.pool.num_free == 8


def test_a_steady_decode_batch_resumes_with_the_batch_id_its_last_iteration_would_have():
    """Two vllm requests finish their prompts (batch 0) and decode (batch 1) with nothing else
    queued: the policy promises the batch unbounded, through completions, growing by pages. After
    a five-iteration run the last iteration is batch 1 + 4, of the members still live."""
    scheduler = build("vllm")
    first_request, second_request = Request(0, 0.0, 16, 10), Request(1, 0.0, 16, 3)
    scheduler.add_request(first_request)
    scheduler.add_request(second_request)
    [prefill] = scheduler.on_schedule()
    for request in prefill.requests:
        request.on_batch_end(1.0, 16)
    scheduler.on_batch_end(prefill)
    [decode] = scheduler.on_schedule()
    promise = scheduler.steady_decode(decode)
    assert promise is not None
    assert (promise.limit, promise.past_completions, promise.growth, promise.frees_on_completion,
            promise.block_size) == (UNBOUNDED, True, "paged", True, 16)
    last, queued = promise.resume(decode, [first_request], 5)
    assert (decode.id, last.id, last.requests, last.num_tokens, last.num_prefill_tokens, queued) == (
        1, 5, [first_request], [1], 0, None)
    assert scheduler.num_batches == 6
