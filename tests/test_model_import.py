"""config.json import: every catalog model from its public config, exact shapes and bytes.

tests/data/hf_configs/<id>.json hold the shape-relevant fields of each model's public
config.json on the Hugging Face hub (the repository is named beside the catalog entry in
sim_core/catalog/models.py); the expected figures below are worked by hand.
"""

import json
from pathlib import Path

import pytest

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.catalog import MODELS, ModelSpec, load_hf_config, model_from_hf_config
from sim_core.memory.model_bytes import (
    KvCacheGroups,
    kv_bytes_per_token,
    kv_bytes_per_token_layer,
    kv_cache_groups,
    local_kv_capped,
    request_kv_bytes,
    stage_weight_bytes,
)

CONFIGS = Path(__file__).parent / "data" / "hf_configs"
LISTED = ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.3-70b", "llama-4-scout", "llama-4-scout-fp8",
          "llama-4-maverick", "qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
          "deepseek-v3", "deepseek-r1", "gpt-oss-20b", "gpt-oss-120b", "gemma-3-27b", "mistral-small-24b",
          "mixtral-8x22b", "mistral-nemo-12b", "yi-34b"]


def imported(name: str):
    return load_hf_config(CONFIGS / f"{name}.json")


def config_of(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


@pytest.mark.parametrize("model_id", LISTED)
def test_the_catalog_entry_is_what_its_config_json_imports_to(model_id):
    """Every field but the display name agrees, so the catalog and the import cannot drift."""
    assert imported(model_id).model_dump(exclude={"name"}) == MODELS[model_id].model_dump(exclude={"name"})


def test_mistral_nemo_reads_head_dim_128_not_hidden_over_heads():
    """5120 / 32 = 160, but config.json says 128: KV per token and layer = 2 x 8 x 128 x 2 bytes
    = 4096; over 40 layers 163,840; at TP 2 each GPU holds 4 KV heads: 2048 per layer."""
    nemo = imported("mistral-nemo-12b")
    assert (nemo.head_dim, nemo.num_kv_heads) == (128, 8)
    assert kv_bytes_per_token_layer(nemo, "bf16") == 4096
    assert kv_bytes_per_token(nemo, "bf16") == 163_840
    assert kv_bytes_per_token_layer(nemo, "bf16", tp=2) == 2048


def test_qwen3_32b_query_width_is_not_the_hidden_size():
    """64 heads x 128 = 8192 query values against a hidden size of 5120 (5120 / 64 = 80).
    Weights per layer: attention 5120 x 128 x (64 + 16) + 64 x 128 x 5120 = 94,371,840, MLP
    3 x 5120 x 25600 = 393,216,000, norms 2 x 5120: 487,598,080 values; 64 layers plus 2 x
    151936 x 5120 embedding and LM head plus the final norm 5120 = 32,762,106,880 values."""
    qwen = imported("qwen3-32b")
    assert qwen.head_dim == 128 and qwen.embedding_dim // qwen.num_q_heads == 80
    assert stage_weight_bytes(qwen, 1, 1, 0) == 2 * 32_762_106_880
    assert kv_bytes_per_token(qwen, "bf16") == 2 * 8 * 128 * 2 * 64


def test_qwen3_30b_a3b_weights_match_the_published_parameter_count():
    """Qwen3-30B-A3B has 30,532,122,624 parameters; we count 30,532,110,336: the 12,288 left
    are its per-head query and key norms (2 x 128 x 48 layers), reviewed as harmless."""
    moe = imported("qwen3-30b-a3b")
    assert (moe.num_experts, moe.num_experts_per_token, moe.mlp_hidden_dim, moe.head_dim) == (128, 8, 768, 128)
    assert stage_weight_bytes(moe, 1, 1, 0) == 2 * 30_532_110_336 == 2 * (30_532_122_624 - 2 * 128 * 48)


def test_deepseek_v2_lite_mla_and_its_dense_first_layer():
    """MLA without a query latent, 16 heads, qk 128 + 64, v 128, latent 512 + 64 rope:
      attention: replicated KV down-projection 2048 x 576 = 1,179,648; query 2048 x 16 x 192 =
        6,291,456; KV up 512 x 16 x 256 = 2,097,152; output 16 x 128 x 2048 = 4,194,304; the KV
        latent's norm 512
      layer 0 (dense, 10944): 3 x 2048 x 10944 = 67,239,936 -> with norms 81,007,104 values
      layers 1-26 (64 experts of 1408, shared 2 x 1408, router 2048 x 64):
        3 x 2048 x (64 x 1408 + 2816) + 131,072 + 13,762,560 + 4096 + 512 = 584,847,872
      embedding 102400 x 2048, LM head the same plus the final norm 2048:
      81,007,104 + 26 x 584,847,872 + 209,715,200 + 209,717,248 = 15,706,484,224 (the published 15.7B).
    The cache holds the 576-value latent per token and layer, the same on every TP rank."""
    lite = imported("deepseek-v2-lite")
    assert (lite.kv_lora_rank, lite.qk_rope_head_dim, lite.q_lora_rank, lite.head_dim) == (512, 64, 0, 192)
    assert (lite.dense_layers, lite.dense_mlp_dim, lite.shared_expert_dim) == ((0,), 10944, 2816)
    assert stage_weight_bytes(lite, 1, 1, 0) == 2 * 15_706_484_224
    assert kv_bytes_per_token_layer(lite, "bf16") == kv_bytes_per_token_layer(lite, "bf16", tp=4) == 576 * 2
    assert kv_bytes_per_token(lite, "fp8") == 576 * 27


def test_deepseek_v3_is_mla_with_three_dense_layers_and_fp8_block_weights():
    """Latent 512 + rope 64 = 576 values per token and layer: 1152 bytes in bf16, 70,272 over 61 layers."""
    v3 = imported("deepseek-v3")
    assert (v3.dense_layers, v3.dense_mlp_dim, v3.shared_expert_dim, v3.q_lora_rank) == ((0, 1, 2), 18432, 2048, 1536)
    assert (v3.weight_dtype, v3.attention_weight_dtype) == ("fp8", None)
    assert kv_bytes_per_token(v3, "bf16", tp=8) == 1152 * 61 == 70_272


def test_llama4_scout_fp8_weights_per_gpu_at_tp2():
    """Experts and shared expert FP8, attention left in bf16 by the `ignore` list, chunked local
    attention (8192) except every 4th layer. Per GPU at TP 2:
      attention 5120 x 128 x (40 + 16) + 40 x 128 x 5120 = 62,914,560 values / 2 x 2 bytes = 62,914,560
      MLP 3 x 5120 x 8192 x (16 + 1) = 2,139,095,040 / 2 x 1 byte = 1,069,547,520
      router 5120 x 16 and two norms 2 x 5120 in bf16 = 184,320
      48 layers: 54,367,027,200; embedding (202048 x 5120 + vision 871,301,632) / 2 x 2 =
      1,905,787,392; LM head 202048 x 5120 / 2 x 2 + final norm 10,240 = 1,034,496,000.
      Total 57,307,310,592 bytes. KV per token: 2 x 128 x 4 heads x 48 layers x 2 = 98,304."""
    scout = imported("llama-4-scout-fp8")
    assert (scout.weight_dtype, scout.attention_weight_dtype, scout.shared_expert_dim) == ("fp8", "bf16", 8192)
    assert (scout.attention_window, scout.attention_window_kind) == (8192, "chunked")
    assert scout.full_attention_layers == (3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47)
    assert stage_weight_bytes(scout, 2, 1, 0) == 57_307_310_592
    assert kv_bytes_per_token(scout, "bf16", tp=2) == 98_304


def test_llama4_maverick_alternates_dense_and_moe_layers():
    """interleave_moe_layer_step 2: layers 1, 3, ... have 128 experts, 0, 2, ... a dense 16384 MLP."""
    maverick = imported("llama-4-maverick")
    assert maverick.dense_layers == tuple(range(0, 48, 2)) and maverick.dense_mlp_dim == 16384
    assert [maverick.is_moe_layer(i) for i in range(4)] == [False, True, False, True]


def test_gpt_oss_local_layers_keep_the_window_only_with_the_hybrid_allocator():
    """gpt-oss-120b: 2 x 8 x 64 x 2 = 2048 bytes per token and layer. A 10,000-token request:
    with vLLM's hybrid allocator (its default here) the 18 sliding layers keep 128 tokens:
    2048 x (18 x 10,000 + 18 x 128) = 373,358,592; without it every layer keeps all:
    2048 x 36 x 10,000 = 737,280,000."""
    oss = imported("gpt-oss-120b")
    assert (oss.weight_dtype, oss.attention_weight_dtype, oss.attention_window) == ("fp4", "bf16", 128)
    assert oss.full_attention_layers == tuple(range(1, 36, 2))
    assert request_kv_bytes(oss, "bf16", 10_000) == 373_358_592
    assert request_kv_bytes(oss, "bf16", 10_000, hybrid_allocator=False) == 737_280_000


def test_chunked_local_attention_is_not_capped_by_default_and_all_local_models_always_are():
    """vLLM 0.33 turns its hybrid allocator off for chunked local attention (Llama-4), so those
    layers keep every token unless it is forced on; a model whose layers are all local (Mistral-7B's
    sliding_window 4096 on every layer) has one KV spec and is capped either way."""
    scout = imported("llama-4-scout")
    assert not local_kv_capped(scout) and local_kv_capped(scout, hybrid_allocator=True)
    mistral = model_from_hf_config({**config_of("mistral-small-24b"), "sliding_window": 4096})
    assert mistral.attention_window == 4096 and mistral.full_attention_layers == ()
    assert local_kv_capped(mistral, hybrid_allocator=False)


def test_gemma3_reads_its_text_config_with_the_family_defaults():
    """Gemma-3's text_config omits vocab (262,208), tied embeddings and the pattern (6): layers
    5, 11, ..., 59 are global, the rest slide over 1024 tokens. Its SigLIP tower:
    27 x (4 x 1152^2 + 2 x 1152 x 4304) + 3 x 14^2 x 1152 + 64^2 x 1152 + 1152 x 5376 = 422,659,584."""
    gemma = imported("gemma-3-27b")
    assert (gemma.vocab_size, gemma.tie_word_embeddings, gemma.attention_window) == (262_208, True, 1024)
    assert gemma.full_attention_layers == tuple(range(5, 62, 6))
    assert gemma.encoder_params == 422_659_584


def test_qwen_sliding_window_applies_only_when_used_and_from_max_window_layers():
    qwen = config_of("qwen3-8b")
    assert model_from_hf_config({**qwen, "sliding_window": 4096}).attention_window is None
    windowed = model_from_hf_config({**qwen, "sliding_window": 4096, "use_sliding_window": True,
                                     "max_window_layers": 30})
    assert windowed.full_attention_layers == tuple(range(30)) and windowed.is_local_layer(30)


def test_an_unknown_key_that_may_change_shapes_is_refused_by_name():
    """GLM-5's sparse-attention indexer keeps its own key cache: not modelled, so refused."""
    glm = {**config_of("deepseek-v3"), "index_head_dim": 128, "index_n_heads": 32}
    with pytest.raises(ConfigError, match="config.json: unknown keys 'index_head_dim', 'index_n_heads'"):
        model_from_hf_config(glm)
    with pytest.raises(ConfigError, match="text_config: unknown key 'moe_expert_groups'"):
        model_from_hf_config({**config_of("llama-4-scout"),
                              "text_config": {**config_of("llama-4-scout")["text_config"], "moe_expert_groups": 2}})
    assert model_from_hf_config({**config_of("yi-34b"), "future_flag": None}).num_layers == 60


@pytest.mark.parametrize("change, message", [
    ({"quantization_config": {"quant_method": "awq", "bits": 4}}, "quant_method: 'awq' is not modelled"),
    ({"quantization_config": {"quant_method": "fp8", "ignored_layers": ["model.layers.0.mlp.down_proj"]}},
     "'model.layers.0.mlp.down_proj' is left unquantized"),
    ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"weights": {"num_bits": 4, "type": "int"}}}}}, "group_0.weights: 4-bit int weights"),
    ({"layer_types": ["linear_attention"] * 60}, "layer_types: 'linear_attention' layers are not modelled"),
])
def test_what_the_import_cannot_model_is_refused_by_field(change, message):
    with pytest.raises(ConfigError, match=message):
        model_from_hf_config({**config_of("yi-34b"), **change})


def test_silicon_cannot_price_local_attention_so_such_a_model_defaults_to_the_roofline():
    assert parse_config({"model": "gpt-oss-120b", "device": "h100-sxm"}).predictor.type == "roofline"
    assert parse_config({"model": "qwen3-8b", "device": "h100-sxm"}).predictor.type == "silicon"
    with pytest.raises(ConfigError, match="silicon .* 'deepseek-v3' has MLA attention and shared experts"):
        parse_config({"model": "deepseek-v3", "device": "h100-sxm", "predictor": {"type": "silicon"}})


@pytest.mark.parametrize("model_id", ["deepseek-v3", "llama-4-maverick"])
def test_the_largest_new_models_serve_on_eight_h200s(model_id):
    """DeepSeek-V3 (FP8, 673 GB) and Maverick (bf16, 803 GB) fit at TP 8 (141 GB each) and finish."""
    config = parse_config({"model": model_id, "device": "h200", "cluster": {"tensor_parallel_size": 8},
                           "max_model_len": 4096, "memory": {"planner": "detailed"},
                           "workload": {"num_requests": 4}})
    assert config.predictor.type == "roofline"
    assert run_simulation(config).summary["num_finished"] == 4


def test_vllm_groups_hybrid_layers_by_the_rarer_attention_type():
    """Gemma-3-27B: 10 global and 52 sliding layers -> groups of 10: 1 full and 6 local (8 padding
    layers); gpt-oss-120b: 18 and 18 -> 1 + 1 groups of 18; with the hybrid allocator off (and for
    Llama-4's chunked layers by default) one group of all layers."""
    assert kv_cache_groups(MODELS["gemma-3-27b"]) == KvCacheGroups(10, 1, 6)
    assert kv_cache_groups(MODELS["gpt-oss-120b"]) == KvCacheGroups(18, 1, 1)
    assert kv_cache_groups(MODELS["gpt-oss-120b"], hybrid_allocator=False) == KvCacheGroups(36, 1, 0)
    assert kv_cache_groups(MODELS["llama-4-scout"]) == KvCacheGroups(48, 1, 0)


def test_a_hand_written_spec_gets_mla_head_dim_and_consistent_layouts():
    """Under `models:` a spec may leave head_dim out (MLA: nope 128 + rope 64 = 192); layer
    lists must be increasing, in range, and describe a window or MoE the model has."""
    mla = {**MODELS["deepseek-v3"].model_dump(exclude={"head_dim"}), "name": "mine"}
    assert ModelSpec(**mla).head_dim == 192
    llama = MODELS["llama-2-7b"].model_dump()
    for change, message in [({"full_attention_layers": (1,)}, "full_attention_layers needs an attention_window"),
                            ({"dense_layers": (0,)}, "describe MoE models"),
                            ({"attention_window": 8, "full_attention_layers": (3, 1)}, "increasing order"),
                            ({"attention_window": 8, "full_attention_layers": (32,)}, "below num_layers"),
                            ({"kv_lora_rank": 512}, "needs qk_rope_head_dim")]:
        with pytest.raises(ValueError, match=message):
            ModelSpec(**{**llama, **change})


def test_gemma2_alternates_sliding_and_global_layers():
    """Gemma-2-9B (google/gemma-2-9b): 42 layers, even ones slide over 4096 tokens, odd ones are
    global; embeddings tied (its family's default); head_dim 256 where 3584 / 16 = 224."""
    gemma2 = model_from_hf_config({
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "attn_logit_softcapping": 50.0,
        "cache_implementation": "hybrid", "final_logit_softcapping": 30.0, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584, "intermediate_size": 14336,
        "max_position_embeddings": 8192, "num_attention_heads": 16, "num_hidden_layers": 42,
        "num_key_value_heads": 8, "query_pre_attn_scalar": 256, "sliding_window": 4096,
        "sliding_window_size": 4096, "vocab_size": 256000})
    assert (gemma2.head_dim, gemma2.tie_word_embeddings, gemma2.attention_window) == (256, True, 4096)
    assert gemma2.full_attention_layers == tuple(range(1, 42, 2))
