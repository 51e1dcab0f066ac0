"""Expert parallelism (EP) and attention data parallelism (DP) of MoE models: validation, the
experts' load imbalance, weights per GPU, the dispatch/combine exchange and its time, GPU counts,
and that EP = DP = 1 is today's arithmetic. The model is docs/design/moe-parallelism.md.

A tiny MoE model keeps the hand arithmetic short: 2 layers, hidden 64, 4 query and 4 KV heads of
16, 8 experts of intermediate size 32 (gated: 3 matrices), top-2, vocabulary 100, 16-bit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.catalog import DeviceSpec, ModelSpec
from sim_core.catalog.moe_layout import MoeLayout, expert_load_imbalance
from sim_core.cluster.pools import num_gpus
from sim_core.config.predictor import RooflinePredictorConfig
from sim_core.memory.model_bytes import stage_weight_bytes
from sim_core.memory.planner import detailed_plan, plan_memory
from sim_core.predictor import operators as ops
from sim_core.predictor.roofline import RooflinePredictor

TINY = {"name": "tiny-moe", "num_layers": 2, "num_q_heads": 4, "num_kv_heads": 4, "head_dim": 16,
        "embedding_dim": 64, "mlp_hidden_dim": 32, "vocab_size": 100, "num_experts": 8, "num_experts_per_token": 2}
MODEL = ModelSpec(**TINY)
# a device whose link makes the exchange's arithmetic round: 100 GB/s, at link_efficiency 0.5 -> 50e9 B/s
DEVICE = DeviceSpec(name="round", bf16_tflops=100, memory_gib=80, memory_bandwidth_gbps=1000, link_bandwidth_gbps=100)


def tiny(cluster: dict, **more) -> dict:
    return {"model": "tiny-moe", "models": {"tiny-moe": TINY}, "device": "a100-80gb",
            "predictor": {"type": "roofline"}, "cluster": cluster, **more}


# ---- validation -------------------------------------------------------------------------------


def test_a_dense_model_refuses_expert_and_data_parallelism_naming_field_value_and_allowed():
    for field in ("expert_parallel_size", "data_parallel_size"):
        with pytest.raises(ConfigError) as caught:
            parse_config({"model": "llama-2-7b", "cluster": {"tensor_parallel_size": 2, field: 2}})
        assert f"cluster.{field}: got 2; allowed: 1 (model 'llama-2-7b' is dense" in str(caught.value)


def test_ep_must_be_one_or_dp_times_tp():
    """TP 2 x DP 2: EP may be 1 or 4; 2 is neither (vLLM splits the experts over every GPU)."""
    with pytest.raises(ConfigError) as caught:
        parse_config(tiny({"tensor_parallel_size": 2, "data_parallel_size": 2, "expert_parallel_size": 2}))
    assert ("cluster.expert_parallel_size: got 2; allowed: 1 or data_parallel_size x tensor_parallel_size = 4"
            in str(caught.value))
    assert parse_config(tiny({"tensor_parallel_size": 2, "data_parallel_size": 2,
                              "expert_parallel_size": 4})).moe_layout() == MoeLayout(2, 2, 4)


def test_ep_must_divide_the_experts():
    """TP 2 x DP 3 = EP 6 does not divide 8 experts."""
    with pytest.raises(ConfigError) as caught:
        parse_config(tiny({"tensor_parallel_size": 2, "data_parallel_size": 3, "expert_parallel_size": 6}))
    assert "cluster.expert_parallel_size: got 6; allowed: a divisor of the model's 8 experts" in str(caught.value)


def test_only_the_roofline_prices_ep_and_dp_and_it_is_the_default_then():
    """Silicon has no tables for EP/DP: asked for, refused; not asked for, roofline is picked
    (on h100-sxm, which has silicon tables, Mixtral without EP defaults to silicon)."""
    base = {"model": "mixtral-8x7b", "device": "h100-sxm"}
    assert parse_config({**base, "cluster": {"tensor_parallel_size": 4}}).predictor.type == "silicon"
    ep = {**base, "cluster": {"tensor_parallel_size": 4, "expert_parallel_size": 4}}
    assert parse_config(ep).predictor.type == "roofline"
    with pytest.raises(ConfigError) as caught:
        parse_config({**ep, "predictor": {"type": "silicon"}})
    assert "predictor.type: silicon has no kernels for expert or data parallelism" in str(caught.value)


def test_disaggregation_refuses_dp():
    with pytest.raises(ConfigError) as caught:
        parse_config(tiny({"data_parallel_size": 2}, disaggregation={"enabled": True},
                          scheduler={"type": "vllm_v1"}))
    assert "cluster.data_parallel_size: got 2; allowed: 1 with disaggregation.enabled" in str(caught.value)


# ---- load imbalance ---------------------------------------------------------------------------


def test_imbalance_of_64_tokens_top2_of_8_experts_over_8_gpus():
    """One expert per GPU: a token's 2 picks land on a GPU with mean 2/8 and variance
    2 (1/8)(7/8)(6/7) = 0.1875; 64 tokens: mean 16, variance 12. Factor 1 + sqrt(2 ln 8) sqrt(12) / 16
    = 1 + 2.039334 x 3.464102 / 16 = 1 + 7.064465 / 16 = 1.441529."""
    assert expert_load_imbalance(64, 8, 2, 8) == pytest.approx(1.441529, abs=1e-6)
    assert expert_load_imbalance(64, 8, 2, 8) == pytest.approx(1 + math.sqrt(2 * math.log(8) * 12) / 16)


def test_imbalance_is_capped_by_what_one_gpu_can_receive_and_is_one_without_ep():
    """One token, top-2 of 8 over 8 GPUs: the bound 1 + 2.039 x 0.433 / 0.25 = 4.53 exceeds the
    most a GPU can get (1 pair = 4 x the mean 0.25): 4. Without EP every GPU runs every expert: 1."""
    assert expert_load_imbalance(1, 8, 2, 8) == 4.0
    assert expert_load_imbalance(64, 8, 2, 1) == 1.0
    grid = expert_load_imbalance(np.array([1.0, 64.0]), 8, 2, 8)
    assert grid.tolist() == pytest.approx([4.0, 1.441529], abs=1e-6)


# ---- weights per GPU --------------------------------------------------------------------------


def test_weights_per_gpu_with_ep_split_experts_over_ep_and_attention_over_tp():
    """TP 2, DP 2, EP 4, per layer: experts 3 x 64 x 32 x 8 / 4 = 12,288 values; attention
    (64 x 16 x (4 + 8) + 4 x 16 x 64) / 2 = 8,192; 2 bytes each = 40,960; router 64 x 8 and two
    norms 128 -> 640 x 2 = 1,280: 42,240 a layer, 84,480 for 2. Embedding 100 x 64 / 2 x 2 = 6,400;
    LM head and final norm (64 + 3,200) x 2 = 6,528. Total 97,408 bytes. EP 1 over the same 4 GPUs
    slices every expert 4 ways instead: the same bytes."""
    assert stage_weight_bytes(MODEL, 2, 1, 0, MoeLayout(2, 2, 4)) == 97408
    assert stage_weight_bytes(MODEL, 2, 1, 0, MoeLayout(2, 2, 1)) == 97408


def test_tp_only_weights_are_unchanged_by_a_trivial_layout():
    """TP 2 alone: experts 49,152 / 2 = 24,576 a layer, (16,384 + 49,152) / 2 x 2 = 65,536 bytes of
    linear layers + 1,280 = 66,816; 2 layers 133,632 + 6,400 + 6,528 = 146,560."""
    assert stage_weight_bytes(MODEL, 2, 1, 0) == 146560
    assert stage_weight_bytes(MODEL, 2, 1, 0, MoeLayout(2)) == 146560


def test_the_detailed_planner_places_experts_by_the_layout():
    plan = detailed_plan(parse_config(tiny({"tensor_parallel_size": 2, "data_parallel_size": 2,
                                            "expert_parallel_size": 4}, memory={"planner": "detailed"})))
    assert plan.weight_bytes == 97408


def test_the_vllm_planner_places_experts_by_the_layout_and_counts_dp_ranks_as_gpus():
    """vllm planner, TP 1, DP 2, EP 2: the weights it loads are the layout's plus the rotary table.
    Per layer: experts 49,152 / 2 = 24,576 values, attention 16,384 (TP 1): 40,960 x 2 = 81,920
    bytes + 1,280 = 83,200; 2 layers 166,400; embedding 100 x 64 x 2 = 12,800; LM head and norm
    (64 + 6,400) x 2 = 12,928: 192,128. Rotary: 4,096 positions x 16 x 2 bytes = 131,072. Total
    323,200. Two GPUs in the group: vLLM's non-torch allowance for several GPUs, 0.7 GiB."""
    config = parse_config(tiny({"data_parallel_size": 2, "expert_parallel_size": 2},
                               memory={"planner": "vllm"}, scheduler={"type": "vllm_v1"}))
    plan = plan_memory(config)
    assert plan.weight_bytes == 323200
    assert plan.non_torch_bytes == 0.7 * 2**30


# ---- pricing ----------------------------------------------------------------------------------


def test_routed_pairs_and_active_experts_on_one_gpu():
    """64 tokens per rank, DP 2, EP 8 (TP 4), top-2, imbalance fixed at 1.25: 64 x 2 x 2 / 8 x 1.25
    = 40 pairs on one GPU, whose 8 / 8 = 1 expert is read once (the group's 128 tokens all miss it
    with probability 0.75^128 = 1e-16). Without EP (DP 2 over TP 4): every GPU computes all
    64 x 2 x 2 = 256 pairs over a 1/8 slice of all 8 experts, of size 32 / 8 = 4, all 8 touched.
    One token per rank under EP 8: the group's 2 tokens touch this GPU's expert with probability
    1 - (3/4)^2 = 7/16 = 0.4375."""
    ep = ops.LayerShape.of(MODEL, 4, MoeLayout(4, 2, 8), load_imbalance=1.25)
    assert (ep.ffn, ep.dp, ep.ep) == (32, 2, 8)
    assert ops.expert_pairs(ep, 64) == pytest.approx((40.0, 1.0), rel=1e-12)
    assert ops.expert_pairs(ep, 1)[1] == pytest.approx(0.4375, rel=1e-12)
    flat = ops.LayerShape.of(MODEL, 4, MoeLayout(4, 2, 1))
    assert flat.ffn == 4
    assert ops.expert_pairs(flat, 64) == pytest.approx((256.0, 8.0), rel=1e-12)


def test_all_to_all_exchange_bytes_and_time_per_layer():
    """All-to-all, EP 4 over TP 4 (DP 1), 64 tokens, top-2, hidden 64: each GPU dispatches its
    64 / 4 = 16 tokens' 2 routed copies, 3/4 of them to other GPUs: 2 bytes x 16 x 2 x 64 x 3/4 =
    3,072 bytes. At 100 GB/s x 0.5 = 50e9 B/s: 3,072 / 50e9 = 6.144e-8 s + 8e-6 latency; dispatch
    and combine in every (MoE) layer: 2 x 8.06144e-6 = 1.612288e-5 s."""
    layout = MoeLayout(4, 1, 4, all_to_all=True)
    assert ops.moe_exchange_bytes(ops.LayerShape.of(MODEL, 4, layout), layout, 64) == 3072
    cfg = RooflinePredictorConfig(link_efficiency=0.5)
    predictor = RooflinePredictor(MODEL, DEVICE, 4, 1, cfg, layout=layout)
    assert predictor.layer_ops(np.array([64.0]))["moe_dispatch_combine"][0] == pytest.approx(1.612288e-5, rel=1e-12)


def test_vllms_default_backend_gathers_every_dp_ranks_hidden_states():
    """allgather_reducescatter, DP 4, 64 tokens per rank, hidden 64: each GPU receives the other 3
    ranks' 64 x 64 values, 2 bytes each: 24,576 bytes (EP or not), and as many back in the
    reduce-scatter. With DP 1 (EP over TP) nothing moves but TP's all-reduce: no exchange."""
    for layout in (MoeLayout(1, 4, 1), MoeLayout(1, 4, 4)):
        assert ops.moe_exchange_bytes(ops.LayerShape.of(MODEL, 1, layout), layout, 64) == 24576
    ops_tp_ep = RooflinePredictor(MODEL, DEVICE, 4, 1, RooflinePredictorConfig(),
                                  layout=MoeLayout(4, 1, 4)).layer_ops(np.array([64.0]))
    assert "moe_dispatch_combine" not in ops_tp_ep and "tp_all_reduce" in ops_tp_ep


def test_a_trivial_layout_prices_exactly_as_before():
    """EP = DP = 1: the same shape, the same operators, no exchange."""
    cfg = RooflinePredictorConfig()
    tokens = np.array([1.0, 64.0, 2048.0])
    before = RooflinePredictor(MODEL, DEVICE, 2, 1, cfg).layer_ops(tokens)
    after = RooflinePredictor(MODEL, DEVICE, 2, 1, cfg, layout=MoeLayout(2)).layer_ops(tokens)
    assert ops.LayerShape.of(MODEL, 2, MoeLayout(2)) == ops.LayerShape.of(MODEL, 2)
    assert before.keys() == after.keys() and "moe_dispatch_combine" not in after
    assert all(np.array_equal(before[name], after[name]) for name in before)


# ---- GPUs and replicas ------------------------------------------------------------------------


def test_each_dp_rank_is_a_scheduling_replica_and_gpus_count_dp():
    """2 replicas of DP 2 x TP 2: 4 scheduling replicas (DP ranks) of 2 GPUs, 8 GPUs in all."""
    config = parse_config(tiny({"num_replicas": 2, "tensor_parallel_size": 2, "data_parallel_size": 2,
                                "expert_parallel_size": 4},
                               workload={"num_requests": 8}))
    assert num_gpus(config) == 8
    result = run_simulation(config)
    assert [r.num_gpus for r in result.replicas] == [2, 2, 2, 2]
