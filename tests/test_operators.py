"""FLOP and byte counts of the layer operators on worked examples (Llama-2-7B, bf16)."""

import numpy as np
import pytest

from sim_core.catalog import DEVICES, MODELS
from sim_core.predictor import operators as ops
from sim_core.predictor.roofline import GEMM_LAUNCH_S, Roofs


def test_gemm_counts_two_flops_per_multiply_add_and_reads_both_operands_once():
    cost = ops.gemm(4, 8, 16)
    assert (cost.flops, cost.bytes) == (2 * 4 * 8 * 16, 2 * (8 * 16 + 4 * 8 + 4 * 16))


def test_llama2_7b_layer_kernels_for_1000_tokens():
    """QKV: 1000 x 4096 @ 4096 x 12288; MLP up is gate and up fused: 4096 x 22016."""
    kernels = ops.layer_kernels(ops.LayerShape.of(MODELS["llama-2-7b"], 1), 1000)
    assert kernels["attn_pre_proj"].flops == 2 * 1000 * 4096 * 12288 == 100_663_296_000
    assert kernels["attn_pre_proj"].bytes == 2 * (4096 * 12288 + 1000 * 4096 + 1000 * 12288)
    assert kernels["mlp_up_proj"].flops == 2 * 1000 * 4096 * 22016
    assert kernels["mlp_down_proj"].bytes == 2 * (11008 * 4096 + 1000 * 11008 + 1000 * 4096)
    assert kernels["attn_kv_cache_save"].bytes == 2 * 2 * 2 * 1000 * 32 * 128
    assert kernels["add"].bytes == 2 * 3 * 1000 * 4096 and kernels["add"].flops == 0
    assert "moe_router" not in kernels


def test_tensor_parallelism_splits_heads_and_ffn_and_replicates_scarce_kv_heads():
    shape = ops.LayerShape.of(MODELS["llama-2-70b"], 16)  # 64 q heads, 8 KV heads
    assert (shape.q_heads, shape.kv_heads, shape.ffn) == (4, 1, 28672 / 16)


def test_moe_experts_read_only_the_weights_of_the_experts_their_tokens_touch():
    """Mixtral, top-2 of 8: an expert misses one token with probability 6/8, all 3 tokens with
    (3/4)^3 = 27/64, so 3 tokens touch 8 x 37/64 = 4.625 experts on average (not min(6, 8)); 100
    tokens miss an expert with probability 0.75^100 = 3.2e-13: all 8 are read. FLOPs and
    activations count every routed pair (3 x 2 = 6, 100 x 2 = 200)."""
    shape = ops.LayerShape.of(MODELS["mixtral-8x7b"], 1)
    few, many = ops.layer_kernels(shape, 3), ops.layer_kernels(shape, 100)
    weights = 4096 * 14336 * 2
    assert few["mlp_up_proj"].bytes == pytest.approx(2 * (4.625 * weights + 6 * (4096 + 2 * 14336)), rel=1e-12)
    assert many["mlp_up_proj"].bytes == pytest.approx(2 * (8 * weights + 200 * (4096 + 2 * 14336)), rel=1e-12)
    assert many["mlp_up_proj"].flops == 2 * 200 * 4096 * 2 * 14336
    assert many["moe_router"].flops == 2 * 100 * 4096 * 8


def test_touched_experts_is_the_expected_count_of_distinct_experts():
    """16 experts, top-1 (Llama-4-Scout): 2 tokens miss an expert with probability (15/16)^2 =
    225/256, so 16 x 31/256 = 1.9375 are touched (a repeat is possible); 22 tokens touch
    16 x (1 - (15/16)^22) = 12.1 of 16, not all 16. Top-2 of 8 with 2 of them on this GPU (EP 4)
    and 2 tokens: 2 x (1 - (3/4)^2) = 2 x 7/16 = 0.875. No tokens, no experts."""
    assert ops.touched_experts(2, 16, 1, 16) == pytest.approx(1.9375, rel=1e-12)
    assert ops.touched_experts(22, 16, 1, 16) == pytest.approx(16 * (1 - (15 / 16) ** 22), rel=1e-12)
    assert 12.1 < ops.touched_experts(22, 16, 1, 16) < 12.2
    assert ops.touched_experts(2, 8, 2, 2) == pytest.approx(0.875, rel=1e-12)
    assert ops.touched_experts(0, 8, 2, 8) == 0
    assert list(ops.touched_experts(np.array([1.0, 2.0]), 16, 1, 16)) == pytest.approx([1.0, 1.9375], rel=1e-12)


def test_causal_prefill_attention_counts_each_query_key_pair_once():
    """A 4-token chunk after 10 cached tokens: queries see 11, 12, 13, 14 keys = 50 pairs."""
    shape = ops.LayerShape.of(MODELS["llama-2-7b"], 1)
    cost = ops.prefill_attention(shape, 4, 10)
    assert cost.flops == 4 * 128 * 32 * 50
    assert cost.bytes == 2 * (2 * 4 * 32 * 128 + 2 * 14 * 32 * 128)


def test_decode_attention_reads_every_cached_key_and_value():
    shape = ops.LayerShape.of(MODELS["llama-3-8b"], 1)  # 8 KV heads
    cost = ops.decode_attention(shape, 2, 3000)
    assert cost.bytes == 2 * (2 * 3000 * 8 * 128 + 2 * 2 * 32 * 128)
    assert cost.flops == 4 * 128 * 32 * 3000


def test_a_kernel_is_the_smooth_maximum_of_its_roofs_plus_launch():
    """A100-80GB at 0.7 / 0.8 efficiency: 218.4 TFLOP/s and 1631.2 GB/s effective."""
    roofs = Roofs(DEVICES["a100-80gb"], 0.7, 0.8, 0.7)
    cost = ops.Cost(218.4e12 * 3e-3, 1631.2e9 * 4e-3)  # 3 ms of compute, 4 ms of memory
    assert float(roofs.kernel(cost)) == pytest.approx(5e-3 + GEMM_LAUNCH_S, rel=1e-12)
    assert float(roofs.all_reduce(1e6, 2)) == pytest.approx(1e6 / 210e9 + 8e-6)


def test_operator_counts_accept_arrays():
    kernels = ops.layer_kernels(ops.LayerShape.of(MODELS["llama-2-7b"], 1), np.array([1.0, 2.0]))
    assert kernels["attn_post_proj"].flops.tolist() == [2 * 4096 * 4096, 4 * 4096 * 4096]


def test_mla_decode_reads_the_latent_once_for_all_heads():
    """DeepSeek-V3 at TP 8: 16 query heads attend the 576-value latent with absorbed weights,
    2 x (576 + 512) FLOPs per key and head; 2 decodes over 1000 cached tokens read 1000 latents
    and the queries' 16 x (576 + 512) values each."""
    shape = ops.LayerShape.of(MODELS["deepseek-v3"], 8)
    cost = ops.decode_attention(shape, 2, 1000)
    assert cost.flops == 2 * (576 + 512) * 16 * 1000
    assert cost.bytes == 2 * (1000 * 576 + 2 * 16 * (576 + 512))
    assert ops.layer_kernels(shape, 10)["attn_kv_cache_save"].bytes == 2 * 2 * 10 * 576


def test_local_layers_see_at_most_the_window_in_prefill_and_decode():
    """Mistral-7B with a 4-token window on every layer: a 6-token prompt's queries see 1, 2, 3, 4,
    4, 4 keys = 18 pairs (causal would be 21). gpt-oss-120b, half its layers local (128): 2 decodes
    over 1000 cached tokens attend 0.5 x 1000 + 0.5 x min(1000, 2 x 128) = 628 keys on average."""
    windowed = MODELS["mistral-7b"].model_copy(update={"attention_window": 4})
    cost = ops.prefill_attention(ops.LayerShape.of(windowed, 1), 6, 0)
    assert cost.flops == 4 * 128 * 32 * 18
    assert ops.attended_context(ops.LayerShape.of(MODELS["gpt-oss-120b"], 1), 2, 1000) == 628


def test_dense_layers_and_shared_experts_are_priced_at_their_share_of_layers():
    """Llama-4-Maverick: half its layers are MoE (experts and a shared expert of 8192), half dense
    (16384): the roofline charges each MLP kernel at half a layer."""
    shape = ops.LayerShape.of(MODELS["llama-4-maverick"], 1)
    kernels = ops.layer_kernels(shape, 100)
    assert kernels["dense_mlp_up_proj"].flops == 2 * 100 * 5120 * 2 * 16384
    assert kernels["shared_expert_down_proj"].flops == 2 * 100 * 8192 * 5120
    shares = {name: shape.kernel_share(name) for name in ("dense_mlp_up_proj", "mlp_up_proj", "shared_expert_act",
                                                         "moe_router", "attn_pre_proj")}
    assert shares == {"dense_mlp_up_proj": 0.5, "mlp_up_proj": 0.5, "shared_expert_act": 0.5, "moe_router": 0.5,
                      "attn_pre_proj": 1.0}
