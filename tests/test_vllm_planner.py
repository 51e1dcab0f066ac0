"""The vllm planner: vLLM's KV budget (gpu_memory_utilization of the device, less weights, the
profile run's activations and the non-torch memory), worked by hand on a tiny model and checked
against the block counts vLLM reported on public runs."""

import pytest

from sim_core import parse_config
from sim_core.config.policies import policy_names, policy_traits
from sim_core.memory import memory_breakdown, plan_memory, vidur_plan
from sim_core.memory.plan import GIB

TINY = {"name": "tiny", "num_layers": 2, "num_q_heads": 2, "num_kv_heads": 1, "embedding_dim": 64,
        "mlp_hidden_dim": 128, "vocab_size": 1000}
ONE_GIB = {"name": "one-GiB GPU", "bf16_tflops": 100, "memory_gib": 1.0, "memory_bandwidth_gbps": 1000,
           "link_bandwidth_gbps": 100}


def tiny(memory: dict | None = None, scheduler: dict | None = None, cluster: dict | None = None):
    return parse_config({"model": "tiny", "device": "one", "models": {"tiny": TINY}, "devices": {"one": ONE_GIB},
                         "max_model_len": 256, "cluster": cluster or {},
                         "memory": {"planner": "vllm", "gpu_memory_utilization": 0.5, "non_torch_gib": 0.25,
                                    **(memory or {})},
                         "scheduler": {"type": "vllm_v1", "max_num_batched_tokens": 2048, "max_num_seqs": 32,
                                       **(scheduler or {})}})


def test_a_tiny_model_gets_the_blocks_worked_out_by_hand():
    """One GPU of 1 GiB at gpu_memory_utilization 0.5: requested = 536,870,912 bytes.
    Weights (bf16, head_dim 64 / 2 = 32): attention 64 x 32 x (2 + 2 x 1) + 2 x 32 x 64 = 12,288
    values, gated MLP 3 x 64 x 128 = 24,576, so 73,728 bytes + two norms 256 = 73,984 per layer,
    147,968 for two; embedding 1,000 x 64 x 2 = 128,000; final norm 128 + LM head 128,000:
    404,096 bytes, and the rotary cache of 4,096 positions x 32 dims x 2 bytes = 262,144 loaded with
    them: 666,240. Profile run (2,048 tokens, 32 requests): the forward pass holds
    2 x 64 + 32 x 4 + 3 x 128 = 640 values a token, 2,048 x 640 x 2 = 2,621,440 bytes; the sampler
    32 x 1,000 x 32 + 2,048 x 64 x 4 = 1,548,288: the forward pass is the peak. Non-torch 0.25 GiB
    = 268,435,456. KV: 536,870,912 - 666,240 - 2,621,440 - 268,435,456 = 265,147,776 bytes; a
    block holds 16 tokens x K and V x 32 x 1 head x 2 layers x 2 bytes = 4,096: 64,733 blocks."""
    plan = plan_memory(tiny())
    assert (plan.planner, plan.weight_bytes, plan.activation_bytes) == ("vllm", 666_240, 2_621_440)
    assert (plan.non_torch_bytes, plan.margin_bytes, plan.kv_bytes_per_block) == (268_435_456, 536_870_912, 4_096)
    assert plan.kv_bytes == 265_147_776 and plan.num_blocks == 64_733
    assert plan.max_batch_size == 64_733 // 16   # 256 tokens = 16 blocks a request


def test_many_requests_make_the_sampler_the_peak():
    """128 requests: the sampler holds 128 x 1,000 x 32 + 2,048 x 64 x 4 = 4,620,288 bytes, more
    than the forward pass's 2,621,440; the KV budget loses the 1,998,848 difference: 488 blocks."""
    plan = plan_memory(tiny(scheduler={"max_num_seqs": 128}))
    assert plan.activation_bytes == 4_620_288
    assert plan.num_blocks == 64_733 - 488      # 1,998,848 / 4,096 = 488 exactly


def test_the_activation_reserve_grows_with_max_num_batched_tokens():
    """Forward peak 640 values x 2 bytes = 1,280 bytes a token: 4,096 tokens hold 5,242,880 bytes
    (the sampler 32 x 1,000 x 32 + 4,096 x 64 x 4 = 2,072,576), 2,621,440 more than 2,048 tokens:
    640 blocks fewer."""
    small, large = plan_memory(tiny()), plan_memory(tiny(scheduler={"max_num_batched_tokens": 4096}))
    assert large.activation_bytes - small.activation_bytes == 2_621_440
    assert small.num_blocks - large.num_blocks == 640


def test_qwen_loses_the_16_blocks_vllm_lost_when_max_num_batched_tokens_doubled():
    """vLLM 0.15.1 gave Qwen2.5-7B on one H100 65,368 blocks at max_num_batched_tokens 1,024 and
    65,352 at 2,048: 16 fewer. The sampler is the peak there and holds 4 bytes per token and hidden
    unit: 1,024 x 3,584 x 4 = 14,680,064 bytes = 16 blocks of 16 x 2 x 128 x 4 x 28 x 2 = 917,504."""
    def blocks(tokens: int) -> int:
        return plan_memory(parse_config({"model": "qwen2.5-7b", "device": "h100-sxm", "max_model_len": 4096,
                                         "scheduler": {"type": "vllm_v1", "max_num_batched_tokens": tokens,
                                                       "max_num_seqs": 128}})).num_blocks
    assert blocks(1024) - blocks(2048) == 16


def test_cuda_graph_memory_comes_out_of_the_kv_budget():
    """vLLM 0.21+ subtracts its CUDA-graph estimate: 1/16 GiB = 67,108,864 bytes = 16,384 blocks."""
    assert plan_memory(tiny(memory={"cuda_graph_gib": 0.0625})).num_blocks == 64_733 - 16_384


def test_non_torch_memory_defaults_to_the_fitted_figure_for_one_gpu_or_several():
    fitted = {"non_torch_gib": None, "gpu_memory_utilization": 1.0}
    one = plan_memory(tiny(memory=fitted))
    two = plan_memory(tiny(memory=fitted, cluster={"tensor_parallel_size": 2}))
    assert (one.non_torch_bytes, two.non_torch_bytes) == (0.2 * GIB, 0.7 * GIB)


def test_only_the_last_pipeline_stage_runs_the_sampler_and_the_bars_add_up():
    """PP=2 with 128 requests: stage 0 holds the forward pass only (2,621,440 bytes), stage 1 the
    sampler's 4,620,288; each bar adds up to the 1 GiB device."""
    config = tiny(scheduler={"max_num_seqs": 128}, cluster={"pipeline_parallel_size": 2})
    plan = plan_memory(config)
    assert plan.stage_activation_bytes == (2_621_440, 4_620_288)
    breakdown = memory_breakdown(config, plan)
    assert breakdown.components == ("weights", "activations", "non_torch", "cuda_graphs", "margin", "kv_cache",
                                    "unused")
    for stage in breakdown.stages:
        parts = sum(getattr(stage, part) for part in breakdown.components)
        assert parts == pytest.approx(GIB, rel=1e-12)
    assert [s.activations for s in breakdown.stages] == [2_621_440, 4_620_288]


def test_auto_keeps_vidur_for_the_vidur_policies_and_picks_vllm_for_vllms_engines():
    planners = {name: policy_traits(name).memory_planner for name in policy_names()}
    assert planners == {"vllm": "vidur", "sarathi": "vidur", "orca": "vidur", "faster_transformer": "vidur",
                        "lightllm": "vidur", "vllm_v0": "vllm", "vllm_v1": "vllm", "sglang": "detailed"}
    config = parse_config({"max_model_len": 2048})      # the default vllm policy: Vidur's numbers
    assert plan_memory(config) == vidur_plan(config)


# Block counts vLLM reported (blocks of 16 tokens, gpu_memory_utilization 0.9): vLLM 0.15.1 on
# H100 (inference-sim/inference-sim testdata, Apache-2.0) and vLLM 0.19 on an RTX 4090
# (casys-kaist/LLMServingSim, MIT). Each GPU as the driver reports it: H100 80GB 79.18 GiB,
# RTX 4090 25,250,627,584 bytes. Shapes from each model's config.json.
H100 = {"name": "H100 as the driver reports it", "bf16_tflops": 989, "memory_gib": 79.18,
        "memory_bandwidth_gbps": 3350, "link_bandwidth_gbps": 450}
RTX_4090 = {"name": "RTX 4090 as the driver reports it", "bf16_tflops": 165.2,
            "memory_gib": 25_250_627_584 / GIB, "memory_bandwidth_gbps": 1008, "link_bandwidth_gbps": 32}
NEMO = {"name": "Mistral-Nemo-12B", "num_layers": 40, "num_q_heads": 32, "num_kv_heads": 8, "embedding_dim": 5120,
        "head_dim": 128, "mlp_hidden_dim": 14336, "vocab_size": 131072}
YI = {"name": "Yi-34B", "num_layers": 60, "num_q_heads": 56, "num_kv_heads": 8, "embedding_dim": 7168,
      "mlp_hidden_dim": 20480, "vocab_size": 64000}
LLAMA31_8B = {"name": "Llama-3.1-8B", "num_layers": 32, "num_q_heads": 32, "num_kv_heads": 8, "embedding_dim": 4096,
              "mlp_hidden_dim": 14336, "vocab_size": 128256}
LLAMA31_70B = {"name": "Llama-3.1-70B", "num_layers": 80, "num_q_heads": 64, "num_kv_heads": 8,
               "embedding_dim": 8192, "mlp_hidden_dim": 28672, "vocab_size": 128256}


@pytest.mark.parametrize("model,gpu,tp,tokens,seqs,max_model_len,reported", [
    ("llama-2-7b", H100, 1, 2048, 128, 4096, 7463),
    ("qwen2.5-7b", H100, 1, 2048, 128, 4096, 65352),
    ("qwen2.5-7b", H100, 1, 1024, 128, 4096, 65368),
    (LLAMA31_70B, H100, 4, 2048, 128, 4096, 30425),
    (LLAMA31_70B, H100, 4, 8192, 128, 4096, 30251),
    (NEMO, H100, 1, 2048, 128, 4096, 19251),
    (NEMO, H100, 2, 1024, 128, 4096, 48009),
    (YI, H100, 2, 2048, 128, 4096, 20793),
    (LLAMA31_8B, RTX_4090, 1, 2048, 256, 32768, 2588),
])
def test_the_planner_is_within_two_percent_of_the_blocks_vllm_reported(model, gpu, tp, tokens, seqs,
                                                                       max_model_len, reported):
    models = {} if isinstance(model, str) else {"m": model}
    config = parse_config({"model": model if isinstance(model, str) else "m", "device": "gpu", "models": models,
                           "devices": {"gpu": gpu}, "max_model_len": max_model_len,
                           "cluster": {"tensor_parallel_size": tp},
                           "scheduler": {"type": "vllm_v1", "max_num_batched_tokens": tokens, "max_num_seqs": seqs}})
    assert plan_memory(config).num_blocks == pytest.approx(reported, rel=0.02)


def test_llama4_scout_fp8_blocks_are_pages_of_all_48_layers_worked_by_hand():
    """Llama-4-Scout FP8 on two H100s (79.18 GiB as the driver reports it), 2,048 tokens and 128
    requests in the profile run. vLLM 0.15.1 turns its hybrid KV manager off for chunked local
    attention, so a block holds all 48 layers: 16 tokens x K and V x 128 x 4 heads x 48 x 2 bytes =
    1,572,864 (the unit vLLM reported in: that run's 8 GiB CPU tier was 5,461 blocks).
    requested ceil(79.18 GiB x 0.9) = ceil(76,516,989,861.9) = 76,516,989,862 bytes; weights
    57,307,310,592 (tests/test_model_import.py) + the rotary cache 10,485,760 positions x 128 x 2
    = 2,684,354,560; the sampler 128 x 202,048 x 32 + 2,048 x 5,120 x 4 = 869,531,648 beats the
    forward pass (2,048 x (2 x 5,120 + 128 x 56 / 2 + 3 x 8,192 / 2) x 2 = 106,954,752); non-torch
    0.7 GiB = 751,619,276.8. KV 14,904,173,785.2 bytes: 9,475 blocks, 1,222 more than vLLM's
    8,253 (docs/design/vllm-memory-planner.md: the 1.79 GiB the planner does not find)."""
    config = parse_config({"model": "llama-4-scout-fp8", "device": "gpu", "devices": {"gpu": H100},
                           "max_model_len": 4096, "cluster": {"tensor_parallel_size": 2},
                           "scheduler": {"type": "vllm_v1", "max_num_batched_tokens": 2048, "max_num_seqs": 128}})
    plan = plan_memory(config)
    assert plan.kv_bytes_per_block == 1_572_864 and 8 * GIB // plan.kv_bytes_per_block == 5_461
    assert (plan.weight_bytes, plan.activation_bytes) == (57_307_310_592 + 2_684_354_560, 869_531_648)
    assert plan.kv_bytes == pytest.approx(14_904_173_785.2, abs=1.0)
    assert plan.num_blocks == 9_475


def test_fp8_dynamic_weights_are_what_vllm_logged_less_the_fp32_scales():
    """RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic (compressed-tensors FP8 with per-channel weight
    scales, as Llama-4-Scout's checkpoint; LM head left in bf16) on two H100s: vLLM 0.11 logged
    `Model loading took 33.88 GiB` (llm-d/llm-d-benchmark, config_explorer/
    empirical-vllm-memory-results.md, Apache-2.0). Per GPU: attention 8,192 x 128 x (64 + 16) +
    64 x 128 x 8,192 = 150,994,944 values and MLP 3 x 8,192 x 28,672 = 704,643,072, halved at
    1 byte = 427,819,008, two norms 2 x 8,192 x 2 = 32,768; 80 layers 34,228,142,080; embedding
    128,256 x 8,192 / 2 x 2 = 1,050,673,152; LM head the same + final norm 16,384; rotary cache
    131,072 x 128 x 2 = 33,554,432: 36,363,059,200 bytes (33.866 GiB). The planner leaves out one
    fp32 scale per output row, 80 x (5,120 + 8,192 + 28,672 + 8,192) x 4 = 16,056,320 bytes; with
    them 36,379,115,520 = 33.881 GiB, the logged figure to its two decimals."""
    model = {**LLAMA31_70B, "name": "Llama-3.3-70B-FP8-dynamic", "max_position_embeddings": 131072,
             "weight_dtype": "fp8"}
    config = parse_config({"model": "m", "device": "gpu", "models": {"m": model}, "devices": {"gpu": H100},
                           "max_model_len": 4096, "cluster": {"tensor_parallel_size": 2},
                           "scheduler": {"type": "vllm_v1", "max_num_batched_tokens": 2048, "max_num_seqs": 128}})
    weights = plan_memory(config).weight_bytes
    assert weights == 36_363_059_200
    assert round((weights + 16_056_320) / GIB, 2) == 33.88
