"""KV offload to a CPU tier (vllm_v1, vLLM 0.33's OffloadingConnector): the tier's LRU and
capacity, its sizing, a narrated run where a prefix evicted from the GPU is loaded back from the
CPU, fast-forward agreement and properties over random workloads (hypothesis).

Figures: llama-2-7b keeps 2 x 128 x 32 heads x 32 layers x 2 bytes = 524,288 bytes of KV per
token, so a 16-token block is 8,388,608 bytes (8 MiB) per GPU at TP 1; 0.125 GiB holds 16 of
them. The default device's host link is 32 GB/s."""

import json

import numpy as np
import pytest
from app_helpers import TINY, chart_specs, open_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from run_agreement import assert_runs_agree

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.export.files import write_outputs
from sim_core.memory.cpu_tier import CpuKvTier, offload_size
from sim_core.results.report import format_summary
from sim_core.viz.kv_blocks import offload_use
from sim_core.workload import Workload

BLOCK_BYTES = 16 * 524_288
LINEAR = {"type": "linear", "base_s": 0.01, "per_token_s": 0.001}


# ---- the CPU tier ------------------------------------------------------------------------------


def test_a_stored_block_is_readable_only_once_its_store_completes():
    """Blocks stored during a step are in the tier but cannot be hit until the step ends."""
    tier = CpuKvTier(4)
    assert tier.store(0, [10, 11], 0) == [10, 11]
    assert tier.num_hits([10, 11]) == 0 and tier.num_used == 2
    tier.complete([10, 11])
    assert tier.num_hits([10, 11, 12]) == 2
    tier.check_integrity()


def test_eviction_takes_the_tail_of_a_request_first_and_never_the_offer_itself():
    """Request 0 stores a0 a1 a2 (ranks (1, 0), (1, -1), (1, -2)); when it finishes they are
    ranked again tail first, so a0 stays the most recent. Request 1's offer of b0, b1 into a
    tier of 4 needs one block: a2 goes (b0, b1 rank (5, 0), (5, -1)). Its next offer, b1 b2,
    may not evict b1 (offered): a1 goes. When request 1 finishes, b2 b1 b0 are ranked again
    behind a0, so request 2's block evicts a0."""
    tier = CpuKvTier(4)
    tier.store(0, [100, 101, 102], 0)
    tier.complete([100, 101, 102])
    assert tier.eviction_order() == [102, 101, 100]
    tier.on_request_finished(0)
    assert tier.eviction_order() == [102, 101, 100]
    assert tier.store(1, [200, 201], 0) == [200, 201]
    tier.complete([200, 201])
    assert 102 not in tier and tier.num_used == 4
    assert tier.store(1, [201, 202], 1) == [202]
    tier.complete([202])
    assert 101 not in tier and tier.eviction_order() == [100, 202, 201, 200]
    tier.on_request_finished(1)                    # fresh ranks: 202, 201, 200 after 100
    assert tier.eviction_order() == [100, 202, 201, 200]
    assert tier.store(2, [203], 3) == [203]
    assert 100 not in tier
    tier.check_integrity()


def test_pinned_and_pending_blocks_are_not_evicted_and_a_store_without_room_stores_nothing():
    """A tier of 2: block 1 is being loaded (pinned), block 2 still being stored; offering 3
    finds nothing to evict and is refused whole; once the load ends block 1 can go."""
    tier = CpuKvTier(2)
    tier.store(0, [1], 0)
    tier.complete([1])
    tier.pin(5, [1], 0)
    tier.store(0, [2], 1)
    assert tier.store(6, [3], 0) is None and 3 not in tier
    tier.unpin([1])
    assert tier.store(6, [3], 0) == [3] and 1 not in tier
    assert tier.num_evicted == 1 and tier.num_stored == 3
    tier.check_integrity()


# ---- sizing --------------------------------------------------------------------------------------


def _config(gib: float, **scheduler) -> dict:
    return {"max_model_len": 2048, "predictor": LINEAR, "model": "llama-2-7b",
            "scheduler": {"type": "vllm_v1", "num_blocks": 6, "block_size": 16, "async_scheduling": False,
                          "api_server_s": 0.0, "kv_offloading_size": gib, **scheduler},
            "engine": {"record": "full"}}


def test_the_tier_holds_the_gib_given_over_the_bytes_of_a_block_on_every_gpu():
    """0.125 GiB / 8 MiB = 16 blocks at TP 1; at TP 2 a GPU holds 4 MiB of a block but vLLM's
    size is for the whole replica (2 GPUs): 16 blocks again; a load is timed per GPU."""
    one = offload_size(parse_config(_config(0.125)), 0.125)
    assert (one.num_blocks, one.block_bytes) == (16, BLOCK_BYTES)
    assert one.load_seconds(4) == 4 * BLOCK_BYTES / 32e9
    two = offload_size(parse_config({**_config(0.125), "cluster": {"tensor_parallel_size": 2}}), 0.125)
    assert (two.num_blocks, two.block_bytes) == (16, BLOCK_BYTES // 2)


def test_bad_offload_settings_are_one_line_errors():
    with pytest.raises(ConfigError, match="kv_offloading_size.*enable_prefix_caching"):
        parse_config(_config(1.0, enable_prefix_caching=False))
    with pytest.raises(ConfigError, match="kv_offloading_size"):
        parse_config(_config(-1.0))
    with pytest.raises(ConfigError, match="kv_offloading_size: 0.001 GiB holds no KV block"):
        run_simulation(parse_config(_config(0.001)), _workload())


# ---- a narrated run ----------------------------------------------------------------------------


def _workload() -> Workload:
    """Request 0 (t 0) and request 2 (t 2) share a 64-token prompt (4 blocks); request 1 (t 1),
    80 unique tokens, needs every GPU block of the 6 and evicts request 0's cached ones."""
    return Workload(np.array([0.0, 1.0, 2.0]), np.array([64, 80, 64]), np.array([2, 2, 2]), "t",
                    prefix_group=np.array([7, -1, 7]), prefix_len=np.array([64, 0, 64]))


def test_a_prefix_evicted_from_the_gpu_is_loaded_back_from_the_cpu_tier():
    """Costs 10 ms + 1 ms per token. Request 0 computes 64 tokens (0.074 s): its 4 prompt blocks
    go to the CPU tier. Request 1's 80 tokens take blocks 4, 5 then evict 3, 2, 1, its decode 0:
    on the GPU request 2 finds nothing, but the CPU tier holds request 0's 4 blocks and 5 of
    request 1 (9 of 16). Without offload request 2 computes 64 tokens: TTFT 0.074 s. With it,
    its whole prompt is loaded, 4 x 8 MiB over 32 GB/s = 1.048576 ms, then it computes its last
    token again (11 ms): TTFT 12.048576 ms, 61.95 ms sooner."""
    without = run_simulation(parse_config(_config(0.0)), _workload())
    result = run_simulation(parse_config(_config(0.125)), _workload())
    load_s = 4 * BLOCK_BYTES / 32e9
    assert load_s == 0.001048576
    assert without.requests["ttft"].tolist()[2] == pytest.approx(0.074, abs=1e-12)
    assert result.requests["ttft"].tolist()[2] == pytest.approx(load_s + 0.011, abs=1e-12)
    assert result.requests["num_cached_tokens"].tolist() == [0, 0, 0]        # no GPU hit
    assert result.batches["request_tokens"].tolist()[4:] == [(1,), (1,)]
    assert result.batches["formed_at"].tolist()[4] == pytest.approx(2.0 + load_s, abs=1e-12)
    rows = result.kv_offload
    assert rows["kind"].tolist() == ["store", "store", "load"]
    assert rows["request_id"].tolist() == [0, 1, 2]
    assert rows["num_blocks"].tolist() == [4, 5, 4]
    assert rows["cpu_blocks_used"].tolist() == [4, 9, 9]
    assert result.summary["kv_offload_blocks_stored"] == 9
    assert result.summary["kv_offload_blocks_evicted"] == 0
    assert result.summary["kv_offload_hit_tokens"] == 64
    assert result.summary["kv_offload_loaded_bytes_per_gpu"] == 4 * BLOCK_BYTES
    assert result.summary["kv_offload_load_s"] == load_s
    assert "kv_offload_hit_tokens" not in without.summary and without.kv_offload.empty
    use = offload_use(result, 0)
    assert use["held"].tolist() == [0, 4, 9, 9] and use["fraction"].tolist()[-1] == 9 / 16
    assert ("KV offload: 9 blocks stored to the CPU tier (0 evicted) | 64 prompt tokens loaded instead of "
            "computed, 1.0 ms of loads") in format_summary(result).splitlines()


def test_a_load_waits_while_a_chunked_prompt_still_needs_the_free_blocks():
    """12 GPU blocks, 32-token steps (10 ms + 1 ms per token). Request 0 (64 tokens, group 7) is
    stored to the CPU; request 1 (176 tokens, 11 blocks, 12 with its output) evicts it from the
    GPU. Request 2 (160 tokens, 10 blocks) starts at 2.0 in 32-token chunks; request 3 (request
    0's prompt) arrives at 2.001. At 2.042 request 2 holds 4 blocks: request 3's 4 would fit in
    the 8 free, but request 2 still needs 6 of them (vLLM's in-flight prefill reservation), so
    it waits; so at 2.084 (6 free, 4 reserved), 2.126 (4, 2) and 2.168 (2 free). Request 2's
    prompt ends at 2.21, its last token at 2.221: only then does request 3's load start,
    1.048576 ms, and its last prompt token is computed again (11 ms): TTFT 0.232048576 s."""
    workload = Workload(np.array([0.0, 1.0, 2.0, 2.001]), np.array([64, 176, 160, 64]), np.array([2, 2, 2, 2]), "t",
                        prefix_group=np.array([7, -1, -1, 7]), prefix_len=np.array([64, 0, 0, 64]))
    result = run_simulation(parse_config(_config(0.25, num_blocks=12, max_num_batched_tokens=32)), workload)
    rows = result.kv_offload
    load = rows[rows["kind"] == "load"]
    assert load["time"].tolist() == [pytest.approx(2.221, abs=1e-12)] and load["request_id"].tolist() == [3]
    assert result.requests["completed_at"].tolist()[2] == pytest.approx(2.221, abs=1e-12)
    assert result.requests["ttft"].tolist()[3] == pytest.approx(0.232048576, abs=1e-12)
    assert rows["num_evicted"].sum() == 0 and rows["cpu_blocks_used"].max() == 25   # 4 + 11 + 10 of 32


def test_the_offload_rows_are_written_to_kv_offload_csv(tmp_path):
    """The narrated run's three rows, times as recorded; a run without offload writes no file."""
    result = run_simulation(parse_config(_config(0.125)), _workload())
    paths = write_outputs(result, tmp_path)
    assert tmp_path / "kv_offload.csv" in paths
    assert (tmp_path / "kv_offload.csv").read_text().splitlines() == [
        "time,replica_id,request_id,kind,num_blocks,bytes_per_gpu,num_evicted,seconds,cpu_blocks_used",
        "0.0,0,0,store,4,33554432,0,0.0,4", "1.0,0,1,store,5,41943040,0,0.0,9",
        "2.0,0,2,load,4,33554432,0,0.001048576,9"]
    plain = write_outputs(run_simulation(parse_config(_config(0.0)), _workload()), tmp_path / "off")
    assert not any(path.name == "kv_offload.csv" for path in plain)


def test_async_scheduling_wakes_the_idle_replica_when_the_load_ends():
    """vLLM's default async loop: request 2's load starts at 2.0 with nothing else running; the
    replica forms its step when the load ends, not at the next arrival."""
    result = run_simulation(parse_config(_config(0.125, async_scheduling=True)), _workload())
    formed = result.batches["formed_at"].tolist()
    assert 2.0 + 0.001048576 in [pytest.approx(t, abs=1e-12) for t in formed]
    assert result.summary["kv_offload_hit_tokens"] == 64


def test_a_loaded_request_taken_back_in_its_admission_step_keeps_a_true_hit_count():
    """prioritize_prefill: a request admitted after its load can be preempted by the decodes of
    the same step, before it ran; undoing its admission must take back only its GPU hit (the
    case hypothesis found: request 6 loaded, then taken back, counted -16 cached tokens)."""
    workload = Workload(np.zeros(7), np.array([1, 1, 1, 1, 110, 27, 41]), np.array([1, 1, 1, 1, 20, 13, 1]), "h",
                        prefix_group=np.zeros(7, dtype=np.int64), prefix_len=np.zeros(7, dtype=np.int64))
    config = {"max_model_len": 256, "model": "llama-2-7b", "predictor": LINEAR,
              "scheduler": {"type": "vllm_v1", "block_size": 16, "num_blocks": 10, "max_num_batched_tokens": 15,
                            "kv_offloading_size": 3 / 128, "prioritize_prefill": True,
                            "long_prefill_token_threshold": 7}}
    result = run_simulation(parse_config(config), workload)
    assert result.summary["kv_offload_hit_tokens"] > 0
    cached, looked_up = result.requests["num_cached_tokens"], result.requests["num_lookup_tokens"]
    assert ((cached >= 0) & (cached <= looked_up)).all()


def test_each_pd_pool_sizes_its_own_tier_and_every_request_is_served():
    """P/D pools of different shapes: a prefill replica of PP 2 holds half of a block's layers on
    each of its 2 GPUs, a decode replica of TP 2 half of its heads: 0.5 GiB is 64 blocks of
    8 MiB on either. The chat's shared system prompt is hit in the CPU tier; requests are
    served as without offload (the same 2 too long for the prefill pool are rejected)."""
    scenario = {**TINY, "workload": {**TINY["workload"], "sessions": {
                    "enabled": True, "min_turns": 2, "max_turns": 4, "think_time_s": 0.5, "system_prompt_tokens": 64}},
                "scheduler": {"type": "vllm_v1", "block_size": 16, "num_blocks": 40, "kv_offloading_size": 0.5},
                "disaggregation": {"enabled": True, "prefill": {"num_blocks": 40, "pipeline_parallel_size": 2},
                                   "decode": {"num_replicas": 2, "tensor_parallel_size": 2, "num_blocks": 60}}}
    tiers = []
    def keep(simulator):
        tiers[:] = [scheduler.offload.tier for scheduler in simulator.schedulers]
    result = run_simulation(parse_config(scenario), after_event=keep)
    assert [tier.num_open_requests for tier in tiers] == [0, 0, 0]   # a hand-off finishes it on its prefill replica
    assert [replica.num_offload_blocks for replica in result.replicas] == [64, 64, 64]
    assert result.summary["kv_offload_hit_tokens"] > 0
    plain = run_simulation(parse_config({**scenario, "scheduler": {**scenario["scheduler"], "kv_offloading_size": 0}}))
    assert result.requests["status"].tolist() == plain.requests["status"].tolist()


def test_the_kv_page_draws_the_cpu_offload_tier():
    """AppTest: the KV page names the tier in its caption and draws its use as a dashed line."""
    scenario = {**TINY, "cluster": {"num_replicas": 1, "tensor_parallel_size": 1, "pipeline_parallel_size": 1},
                "workload": {**TINY["workload"], "sessions": {"enabled": True, "min_turns": 2, "max_turns": 3,
                                                              "think_time_s": 0.5, "system_prompt_tokens": 64}},
                "scheduler": {"type": "vllm_v1", "block_size": 16, "num_blocks": 64, "kv_offloading_size": 1.0}}
    app = open_app("pages/kv_cache.py", scenario)
    assert not app.exception
    assert any(caption.value.startswith("KV offload:") for caption in app.caption)
    names = {trace.get("name") for trace in json.loads(chart_specs(app)[0])["data"]}
    assert "replica 0 CPU offload use" in names


# ---- properties ------------------------------------------------------------------------------------


@st.composite
def offload_runs(draw, spaced: bool = False):
    """Small vllm_v1 runs with shared prefixes, a small GPU pool and a small CPU tier."""
    block_size = draw(st.sampled_from([4, 16]))
    n = draw(st.integers(1, 14))
    gap = 100.0 if spaced else 1.0
    arrivals = sorted(draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=n, max_size=n)))
    arrivals = [a + i * gap for i, a in enumerate(arrivals)] if spaced else arrivals
    prefill = draw(st.lists(st.integers(1, 120), min_size=n, max_size=n))
    workload = Workload(np.array(arrivals), np.array(prefill, dtype=np.int64),
                        np.array(draw(st.lists(st.integers(1, 40), min_size=n, max_size=n)), dtype=np.int64), "h",
                        prefix_group=np.array(draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n))),
                        prefix_len=np.array([draw(st.integers(0, p)) for p in prefill], dtype=np.int64))
    # a block is 8 MiB at block size 16, 2 MiB at 4: the tier holds 1-64 of the larger blocks
    gib = draw(st.integers(1, 64)) * 8 / 1024
    scheduler = {"type": "vllm_v1", "block_size": block_size,
                 "num_blocks": draw(st.integers(200 // block_size, 400 // block_size)),
                 "max_num_batched_tokens": draw(st.integers(8, 96)),
                 "async_scheduling": draw(st.booleans()), "kv_offloading_size": gib}
    config = {"max_model_len": 256, "model": "llama-2-7b", "device": "a100-80gb",
              "predictor": draw(st.sampled_from([LINEAR, {"type": "roofline"}])), "scheduler": scheduler}
    return config, workload


def _checked(config: dict, workload: Workload):
    tiers = []

    def check(simulator):
        tiers[:] = [scheduler.offload.tier for scheduler in simulator.schedulers]
        for tier in tiers:
            tier.check_integrity()   # never more blocks than the tier has
    result = run_simulation(parse_config({**config, "engine": {"fast_forward": False, "record": "full"}}), workload,
                            after_event=check)
    assert [tier.num_open_requests for tier in tiers] == [0] * len(tiers)   # every request finished there
    return result


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(offload_runs())
def test_the_tier_stays_within_its_capacity_and_every_request_computes_what_no_cache_supplied(case):
    """After every event the tier passes check_integrity (at most its capacity, pins only on
    readable blocks); every request finishes (the tier forgets it), having computed its tokens
    less its GPU and CPU hits (when never preempted)."""
    config, workload = case
    result = _checked(config, workload)
    requests = result.requests
    assert (requests["status"] == "finished").all()
    cached = requests["num_cached_tokens"]
    assert ((cached >= 0) & (cached <= requests["num_lookup_tokens"])).all()
    rows = result.kv_offload
    assert (rows["cpu_blocks_used"] <= result.replicas[0].num_offload_blocks).all()
    loads = rows[rows["kind"] == "load"]
    loaded = loads.groupby("request_id")["num_blocks"].sum() * config["scheduler"]["block_size"]
    processed = {rid: 0 for rid in requests["request_id"]}
    for ids, tokens in zip(result.batches["request_ids"], result.batches["request_tokens"]):
        for rid, count in zip(ids, tokens):
            processed[rid] += count
    for row in requests.itertuples():
        if row.num_restarts == 0:
            supplied = row.num_cached_tokens + min(int(loaded.get(row.request_id, 0)),
                                                   row.num_prefill_tokens - 1 - row.num_cached_tokens)
            assert processed[row.request_id] == row.num_prefill_tokens + row.num_decode_tokens - 1 - supplied


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(offload_runs(spaced=True))
def test_offload_never_loses_a_hit_when_requests_come_one_at_a_time(case):
    """Requests 100 s apart (each alone on the replica): with offload, each one's GPU hit plus
    CPU hit is at least its GPU hit without offload."""
    config, workload = case
    with_offload = run_simulation(parse_config(config), workload)
    off = {**config, "scheduler": {**config["scheduler"], "kv_offloading_size": 0.0}}
    without = run_simulation(parse_config(off), workload)
    loads = with_offload.kv_offload[with_offload.kv_offload["kind"] == "load"]
    loaded = loads.groupby("request_id")["num_blocks"].sum() * config["scheduler"]["block_size"]
    for rid, gpu, gpu_alone in zip(with_offload.requests["request_id"], with_offload.requests["num_cached_tokens"],
                                   without.requests["num_cached_tokens"]):
        assert gpu + int(loaded.get(rid, 0)) >= gpu_alone


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(offload_runs())
def test_fast_forward_and_stepwise_agree_with_offload(case):
    """Fast-forwarded and stepwise runs, reruns and record levels give identical tables,
    the offload rows included (serial scheduling: async runs never fast-forward)."""
    config, workload = case
    config = {**config, "scheduler": {**config["scheduler"], "async_scheduling": False}}
    assert_runs_agree(config, workload)
