"""Invariants of vllm_v1 and sglang over random small scenarios with shared prefixes (hypothesis)."""


import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from run_agreement import assert_runs_agree

from sim_core import parse_config, run_simulation
from sim_core.config.policies import for_policy
from sim_core.workload import Workload


@st.composite
def prefix_columns(draw, n: int, prefill: list[int]) -> dict:
    """Optional columns: shared group prefixes, sessions, priorities (each maybe absent)."""
    columns = {}
    if draw(st.booleans()):
        columns["prefix_group"] = np.array(draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n)), dtype=np.int64)
        columns["prefix_len"] = np.array([draw(st.integers(0, p)) for p in prefill], dtype=np.int64)
    if draw(st.booleans()):
        columns["session_id"] = np.array(draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n)), dtype=np.int64)
        columns.setdefault("prefix_len", np.array([draw(st.integers(0, p)) for p in prefill], dtype=np.int64))
    if draw(st.booleans()):
        columns["priority"] = np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), dtype=np.int64)
    return columns


@st.composite
def scenarios(draw):
    policy = draw(st.sampled_from(["vllm_v1", "sglang"]))
    block_size = draw(st.sampled_from([1, 4, 8, 16]))
    max_model_len = 256
    caching = draw(st.booleans())
    # vllm_v1: async steps (its default) and serial; KV offload (it needs caching) from a tier of
    # a few blocks (llama-2-7b: 8 MiB per 16-token block) to one that holds everything
    offload = draw(st.sampled_from([0.0, 0.0, 0.02, 0.05, 4.0])) if caching else 0.0
    config = {
        "seed": draw(st.integers(0, 100)), "max_model_len": max_model_len,
        "predictor": draw(st.sampled_from([
            {"type": "linear", "base_s": draw(st.sampled_from([0.001, 0.005])),
             "per_token_s": draw(st.sampled_from([0.0, 1e-5, 1e-3]))},
            {"type": "roofline"}])),
        "model": draw(st.sampled_from(["llama-2-7b", "phi-2"])),
        "device": "a100-80gb",
        "cluster": {"num_replicas": draw(st.integers(1, 2)),
                    "pipeline_parallel_size": draw(st.sampled_from([1, 1, 2])),
                    "global_scheduler": draw(st.sampled_from(["round_robin", "lor", "least_outstanding",
                                                               "power_of_two"]))},
        "scheduler": for_policy({"type": policy, "block_size": block_size,   # the knobs the policy reads
                      "num_blocks": draw(st.integers(max(2, 64 // block_size), 300 // block_size + 8)),
                      "enable_prefix_caching": caching, "kv_offloading_size": offload,
                      "async_scheduling": draw(st.sampled_from([True, True, False])),
                      "max_num_seqs": draw(st.integers(0, 8)),
                      "max_num_batched_tokens": draw(st.integers(1, 96)),
                      "long_prefill_token_threshold": draw(st.integers(0, 40)),
                      "prioritize_prefill": draw(st.booleans()),
                      "scheduling_policy": draw(st.sampled_from(["fcfs", "priority"])),
                      "max_prefill_tokens": draw(st.integers(1, 128)),
                      "chunked_prefill_size": block_size * draw(st.integers(0, 64 // block_size + 1)),
                      "max_running_requests": draw(st.integers(0, 8)),
                      "cuda_graph_batch_sizes": draw(st.sampled_from([[], [1, 2, 4, 8], [3]])),
                      "enable_overlap_schedule": draw(st.booleans())}, policy),
    }
    n = draw(st.integers(1, 20))
    arrivals = sorted(draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=n, max_size=n)))
    if draw(st.booleans()):
        arrivals = [round(a, 1) for a in arrivals]
    prefill = draw(st.lists(st.integers(1, 120), min_size=n, max_size=n))
    decode = draw(st.lists(st.integers(1, 100), min_size=n, max_size=n))
    columns = draw(prefix_columns(n, prefill))
    workload = Workload(np.array(arrivals), np.array(prefill, dtype=np.int64), np.array(decode, dtype=np.int64),
                        "h", **columns)
    return config, workload


def _check_state(simulator, last_time):
    assert simulator.kernel.now >= last_time[0], "time went backwards"
    last_time[0] = simulator.kernel.now
    holders = [r for r in simulator.requests if r.num_blocks]
    for scheduler in simulator.schedulers:
        scheduler.pool.check_integrity([r for r in holders if r.replica_id == scheduler.replica_id])
        assert set(scheduler.busy) <= {r.id for r in scheduler.running} | {r.id for r in holders}
    for request in simulator.requests:
        assert 0 <= request.num_processed_tokens <= request.total_tokens


def _run(config, workload, fast_forward=True, check=False, record="full"):
    config = parse_config({**config, "engine": {"fast_forward": fast_forward, "record": record}})
    last_time = [0.0]
    hook = (lambda sim: _check_state(sim, last_time)) if check else None
    return run_simulation(config, workload, after_event=hook)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_pools_and_caches_stay_whole_and_every_request_finishes_or_is_reported(case):
    """After every event: block pools, hash caches and radix trees pass check_integrity (reference
    counts equal the tables holding each block, locks equal the holders on each path). Every
    request finishes or is rejected up front with a reason (none is left stuck); a finished request computed exactly its
    tokens, less what the prefix cache supplied, plus recomputation after preemptions."""
    config, workload = case
    result = _run(config, workload, fast_forward=False, check=True)
    requests = result.requests
    assert set(requests["status"]) <= {"finished", "rejected"}
    assert (requests["reject_reason"][requests["status"] == "rejected"] != "").all()
    # nobody starves: a request that fits the replica alone is eventually served (no livelock)
    assert not requests["reject_reason"].str.startswith("never finished").any()
    finished = requests[requests["status"] == "finished"]
    assert (finished["completed_at"] >= finished["prefill_completed_at"]).all()
    assert (finished["prefill_completed_at"] > finished["scheduled_at"]).all()
    assert (finished["num_cached_tokens"] <= finished["num_lookup_tokens"]).all()
    processed = pd.Series(0, index=requests.index, dtype=np.int64)
    for ids, tokens in zip(result.batches["request_ids"], result.batches["request_tokens"]):
        for rid, count in zip(ids, tokens):
            processed[rid] += count
    offload = config["scheduler"].get("kv_offloading_size", 0.0) > 0   # loaded tokens are not computed, nor cached
    for row in finished.itertuples():
        expected = row.num_prefill_tokens + row.num_decode_tokens - 1 - row.num_cached_tokens
        if offload:
            assert row.num_restarts or processed[row.request_id] <= expected
        elif row.num_restarts == 0:
            assert processed[row.request_id] == expected
        else:
            assert processed[row.request_id] >= expected
    padded = result.batches["padded_size"] >= result.batches["num_requests"]
    assert padded.all()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_fast_forward_reruns_and_record_levels_agree(case):
    """Fast-forwarded and stepwise runs, reruns and every record level give identical tables
    (vllm_v1: async steps or serial, prefix caching on or off, KV offload on or off)."""
    config, workload = case
    assert_runs_agree(config, workload)
