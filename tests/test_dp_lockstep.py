"""The DP ranks of a MoE replica step together (engine/dp_group.py, docs/design/moe-parallelism.md):
a group step lasts as long as its slowest rank, an idle rank runs a dummy batch meanwhile (not
recorded as served work), and the ranks are padded to the largest when every rank's step is at
most the CUDA-graph limit (min(2 x max_num_seqs, 512) tokens)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim_core import parse_config, run_simulation
from sim_core.config.policies import for_policy, policy_names
from sim_core.engine.dp_group import dp_padded, graph_limit
from sim_core.predictor import BatchShape, build_predictor
from sim_core.workload import Workload

TINY = {"name": "tiny-moe", "num_layers": 2, "num_q_heads": 4, "num_kv_heads": 4, "head_dim": 16,
        "embedding_dim": 64, "mlp_hidden_dim": 32, "vocab_size": 100, "num_experts": 8, "num_experts_per_token": 2}


def workload(*rows: tuple[float, int, int]) -> Workload:
    arrived, prefill, decode = zip(*rows)
    return Workload(np.array(arrived, dtype=float), np.array(prefill, dtype=np.int64),
                    np.array(decode, dtype=np.int64), "test")


def linear_moe(dp: int) -> dict:
    """Tiny MoE, DP ranks routed round robin, linear cost 10 ms + 1 ms per token."""
    return {"model": "tiny-moe", "models": {"tiny-moe": TINY}, "device": "a100-80gb",
            "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
            "cluster": {"data_parallel_size": dp, "global_scheduler": "round_robin"}}


def stage_spans(result, replica: int) -> list[tuple[float, float]]:
    stages = result.batch_stages[result.batch_stages["replica_id"] == replica]
    return [(round(s, 9), round(e, 9)) for s, e in zip(stages["start"], stages["end"])]


def test_a_decode_rank_waits_for_the_prefill_rank_and_an_idle_rank_steps_dummy_batches():
    """DP 2. A (prompt 1000, 3 output tokens) goes to rank 0, B (prompt 10, 4 tokens) to rank 1,
    both at 0. Step 1: rank 0 prefills 1000 tokens (10 + 1000 ms = 1.010 s), rank 1 prefills 10
    (0.020 s); 1000 tokens is past the CUDA-graph limit (512): no padding; the group ends at
    1.010, rank 1 included. Steps 2, 3: one decode each, 0.011 s: 1.021, 1.032 (A done: its
    first token came with the prefill). Step 4: B's last decode on rank 1 while rank 0, idle,
    runs a dummy batch of 1 token (0.011 s): 1.043. Alone, B would end at 0.020 + 3 x 0.011 =
    0.053. The dummy batch is in no table: rank 0 recorded 3 batches, rank 1 four."""
    calls = []
    result = run_simulation(parse_config(linear_moe(2)), workload=workload((0.0, 1000, 3), (0.0, 10, 4)),
                            after_event=lambda sim: calls.append(list(sim.dp.num_dummy_steps)))
    requests = result.requests.set_index("request_id")
    assert requests.loc[0, "completed_at"] == pytest.approx(1.032)
    assert requests.loc[1, "completed_at"] == pytest.approx(1.043)
    assert stage_spans(result, 0) == [(0.0, 1.01), (1.01, 1.021), (1.021, 1.032)]
    assert stage_spans(result, 1) == [(0.0, 1.01), (1.01, 1.021), (1.021, 1.032), (1.032, 1.043)]
    assert calls[-1] == [1, 0]
    assert len(result.batches[result.batches["replica_id"] == 0]) == 3


def test_dense_ranks_are_independent_without_dp():
    """The same two requests on two plain replicas (DP 1): B ends at 0.020 + 3 x 0.011 = 0.053,
    not held by A's prefill."""
    config = linear_moe(1)
    config["cluster"]["num_replicas"] = 2
    result = run_simulation(parse_config(config), workload=workload((0.0, 1000, 3), (0.0, 10, 4)))
    assert result.requests.set_index("request_id").loc[1, "completed_at"] == pytest.approx(0.053)


def test_ranks_are_padded_to_the_largest_under_the_graph_limit():
    """Mixtral-8x7B, roofline, H100, TP 2 x DP 2, no async scheduling. A (prompt 16,000, 3
    tokens) reaches rank 0 at 0: step 1 is its prefill (past the graph limit: rank 1's dummy
    batch is not padded), its experts seeing the group's 16,001 tokens (not 2 x 16,000): it ends
    at P1 = price(prefill 16,000) + group_correction(16,000, 16,001) (the dummy's is smaller).
    B (prompt 300) reaches rank 1 at 1 ms, mid-step: it waits, is scheduled at P1 and prefills
    in step 2 beside A's first decode (context 16,001: the prompt and its first token). 300 <=
    512: rank 0's decode is padded with 299 dummy tokens, and its price then exceeds B's
    prefill: both ranks end at
    P1 + price(decode padded to 300) (longer than B's prefill alone)."""
    config = {"model": "mixtral-8x7b", "device": "h100-sxm", "predictor": {"type": "roofline"},
              "scheduler": {"type": "vllm_v1", "async_scheduling": False, "max_num_batched_tokens": 16384},
              "cluster": {"tensor_parallel_size": 2, "data_parallel_size": 2, "global_scheduler": "round_robin"}}
    scenario = parse_config(config)
    price = build_predictor(scenario).stage_time
    prefill_a, dummy = BatchShape(1, 16000, ((16000, 0),), 0, 0), BatchShape(1, 1, (), 1, 0)
    prefill_b, decode_a = BatchShape(1, 300, ((300, 0),), 0, 0), BatchShape(1, 1, (), 1, 16001)
    padded_decode = dp_padded(decode_a, 299)
    assert padded_decode == BatchShape(1, 300, (), 1, 16001)
    correction = build_predictor(scenario).group_correction
    p1 = 0.0 + max(price(prefill_a, 0) + correction(16000, 16001), price(dummy, 0) + correction(1, 16001))
    assert price(prefill_a, 0) + correction(16000, 16001) > price(dummy, 0) + correction(1, 16001)
    assert correction(300, 600) == correction(1, 2) == 0.0   # padded steps: DP x tokens is the group's
    step2 = max(price(padded_decode, 0), price(prefill_b, 0))
    assert price(padded_decode, 0) > price(prefill_b, 0) > price(decode_a, 0)   # the padding decides
    result = run_simulation(scenario, workload=workload((0.0, 16000, 3), (0.001, 300, 2)))
    stages = result.batch_stages
    b_prefill = stages[stages["replica_id"] == 1].iloc[0]
    a_decode = stages[stages["replica_id"] == 0].iloc[1]
    assert b_prefill["start"] == a_decode["start"] == pytest.approx(p1, abs=1e-12)
    assert b_prefill["end"] == a_decode["end"] == pytest.approx(p1 + step2, abs=1e-12)
    assert result.requests.set_index("request_id").loc[1, "scheduled_at"] == pytest.approx(p1, abs=1e-12)


def test_the_experts_of_an_unpadded_step_see_the_groups_tokens():
    """Tiny MoE, roofline, DP 2: a rank of 600 tokens whose group runs 600 + 40 tokens is priced
    with its experts and dispatch / combine as for 320 tokens a rank (the group's 640 / 2), not
    600: the correction is the difference of those operators' times between a 320-token and a
    600-token step (the predictor's own per-operator breakdown), and it is a saving."""
    scenario = parse_config({"model": "tiny-moe", "models": {"tiny-moe": TINY}, "device": "a100-80gb",
                             "predictor": {"type": "roofline"}, "cluster": {"data_parallel_size": 2}})
    predictor = build_predictor(scenario)
    own, mean = predictor.breakdown(BatchShape(1, 600), 0), predictor.breakdown(BatchShape(1, 320), 0)
    group_ops = ("mlp_up_proj", "mlp_act", "mlp_down_proj", "moe_dispatch_combine")
    expected = sum(mean[name] - own[name] for name in group_ops)
    assert predictor.group_correction(600, 640) == pytest.approx(expected, rel=1e-12)
    assert expected < 0


def test_graph_limit_is_vllms_default_capture_size():
    """min(2 x max_num_seqs, 512): 256 sequences -> 512, 100 -> 200, unbounded (0) -> 512."""
    assert (graph_limit(256), graph_limit(100), graph_limit(0)) == (512, 200, 512)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(policy_names()), st.integers(2, 3), st.data())
def test_every_policy_steps_its_dp_groups_as_disjoint_common_intervals(policy, dp, data):
    """Any policy, random arrivals: every request finishes, and the stage spans of a group's
    ranks are whole group steps: spans that start together end together, and the group's steps
    never overlap (a rank never runs while another rank of its group is in a different step)."""
    n = data.draw(st.integers(1, 20))
    arrivals = sorted(data.draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=n, max_size=n)))
    if data.draw(st.booleans()):   # simultaneous arrivals stress same-time ordering
        arrivals = [round(a, 1) for a in arrivals]
    prompts = data.draw(st.lists(st.integers(1, 700), min_size=n, max_size=n))
    outputs = data.draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    config = linear_moe(dp)
    config["scheduler"] = for_policy({"batch_size_cap": data.draw(st.sampled_from([2, 8, 128])),
                                      "block_size": 1 if policy == "lightllm" else 16}, policy)
    config["cluster"]["num_replicas"] = 2
    result = run_simulation(parse_config(config), workload=workload(*zip(arrivals, prompts, outputs)))
    assert (result.requests["status"] == "finished").all()
    stages = result.batch_stages.assign(group=result.batch_stages["replica_id"] // dp)
    for _, spans in stages.groupby("group"):
        steps = spans.groupby("start")["end"].agg(["min", "max"]).sort_index()
        assert (steps["min"] == steps["max"]).all()
        assert (steps["max"].to_numpy()[:-1] <= steps.index.to_numpy()[1:]).all()
