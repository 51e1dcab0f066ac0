"""Catalogs: the promised ids, Hugging Face config import, and every model on every device."""

import json

import pytest

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.catalog import DEVICES, MODELS, load_hf_config, model_from_hf_config
from sim_core.memory import plan_memory
from sim_core.memory.plan import GIB

MODEL_IDS = ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "mistral-7b", "qwen2.5-7b",
             "qwen2.5-72b", "codellama-34b", "phi-2", "mixtral-8x7b", "llama-3.1-8b", "llama-3.1-70b",
             "llama-3.1-405b", "llama-3.3-70b", "llama-4-scout", "llama-4-scout-fp8", "llama-4-maverick", "qwen3-8b",
             "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3", "deepseek-r1",
             "gpt-oss-20b", "gpt-oss-120b", "gemma-3-27b", "mistral-small-24b", "mixtral-8x22b", "mistral-nemo-12b",
             "yi-34b"]
DEVICE_IDS = ["a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200", "l40s", "a40", "a30", "mi300x", "rtx-4090",
              "h100-pcie", "h20", "gh200", "b300", "gb200", "rtx-pro-6000", "mi325x", "mi355x"]


def test_catalog_ids_are_the_documented_ones():
    assert set(MODEL_IDS) <= set(MODELS) and set(DEVICE_IDS) <= set(DEVICES)
    assert (MODELS["mixtral-8x7b"].num_experts, MODELS["mixtral-8x7b"].num_experts_per_token) == (8, 2)


LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192}


def test_hf_config_of_a_gqa_model_gives_the_catalog_shape():
    spec = model_from_hf_config(LLAMA3_8B)
    assert spec.model_dump(exclude={"name"}) == MODELS["llama-3-8b"].model_dump(exclude={"name"})


def test_hf_config_of_moe_and_ungated_models():
    moe = model_from_hf_config({"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
                                "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632,
                                "moe_intermediate_size": 1408, "num_experts": 60, "num_experts_per_tok": 4,
                                "vocab_size": 151936})
    assert (moe.num_experts, moe.num_experts_per_token, moe.mlp_hidden_dim) == (60, 4, 1408)
    phi = model_from_hf_config({"model_type": "phi", "hidden_size": 2560, "num_hidden_layers": 32,
                                "num_attention_heads": 32, "intermediate_size": 10240, "vocab_size": 51200})
    assert (phi.use_gated_mlp, phi.num_kv_heads) == (False, 32)


def test_bad_hf_configs_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="config.json: missing 'hidden_size' .*n_embd, d_model"):
        model_from_hf_config({"num_attention_heads": 4})
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="config.json: not valid JSON"):
        load_hf_config(path)


def test_a_scenario_can_import_a_model_from_a_config_json_next_to_it(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B))
    config = parse_config({"model": "mine", "models": {"mine": {"hf_config": "config.json"}}}, base_dir=tmp_path)
    assert config.model_spec().num_kv_heads == 8 and config.model_spec().name == "mine"


def test_every_catalog_model_runs_on_every_catalog_device_where_it_fits():
    """A tiny workload on every catalog model x the listed devices (detailed planner, the default
    cost model): it either finishes or the planner says in one line that the weights leave no
    room. About 20 ms a pair."""
    ran, refused = set(), set()
    for model in MODELS:
        for device in DEVICE_IDS:
            config = parse_config({"model": model, "device": device, "max_model_len": 2048,
                                   "memory": {"planner": "detailed"}, "engine": {"record": "requests"},
                                   "workload": {"num_requests": 3}})
            try:
                result = run_simulation(config)
            except ConfigError as error:
                assert f"memory: {model} on {device}" in str(error) and "leaves no room" in str(error)
                refused.add((model, device))
                continue
            assert result.summary["num_finished"] == 3
            ran.add((model, device))
    assert len(ran) + len(refused) == len(MODELS) * len(DEVICE_IDS)
    assert {("llama-2-70b", "rtx-4090"), ("mixtral-8x7b", "a100-80gb"), ("qwen2.5-72b", "h100-sxm"),
            ("deepseek-v3", "b200"), ("gemma-3-27b", "rtx-4090"), ("llama-4-scout", "h200")} <= refused
    assert {("phi-2", "rtx-4090"), ("llama-3-70b", "mi300x"), ("mixtral-8x7b", "h200"), ("gpt-oss-120b", "h100-sxm"),
            ("llama-4-scout-fp8", "h200"), ("qwen3-30b-a3b", "a100-80gb"), ("gemma-3-27b", "a100-80gb")} <= ran
    # 140 GB of Llama-2-70B weights: not on a 96 GB RTX PRO 6000, on a 268.6 GiB B300
    assert ("llama-2-70b", "rtx-pro-6000") in refused and ("llama-2-70b", "b300") in ran


def test_vllm_sizes_an_l40s_from_the_memory_pytorch_reports_not_the_nominal_48_gb():
    """vLLM multiplies gpu_memory_utilization into PyTorch's total; an L40S reports 44.42 GiB
    (nvidia-smi 46,068 MiB; the 48 is the nominal GB). At 0.9, 10% of 44.42 GiB is left unused:
    4.442 GiB, where the nominal 48 would leave 4.8."""
    plan = plan_memory(parse_config({"model": "llama-3.1-8b", "device": "l40s", "max_model_len": 4096,
                                     "scheduler": {"type": "vllm_v1"}}))
    assert plan.device_bytes == pytest.approx(44.42 * GIB, rel=1e-12)
    assert plan.margin_bytes == pytest.approx(4.442 * GIB, abs=1.0)


def test_the_rtx_devices_price_kernels_and_the_pro_6000s_collectives_as_measured():
    """The RTX 4090's and RTX PRO 6000's efficiencies are the fit to vLLM 0.19's measured kernels
    (bench/rtx_kernels.py): GEMMs at 0.98 / 0.94 and 0.74 / 0.83 (compute / memory), the paged KV
    cache read at 0.87 and 0.74. Two RTX PRO 6000 without PCIe peer-to-peer all-reduce through host
    memory at 16 GB/s: the catalog's 22.86 GB/s link at the roofline's link_efficiency 0.7 (16.002
    GB/s), with 20 us a message (LLMServingSim's description of the box), so the all-reduce of a
    128-token decode step of Qwen3-32B at TP 2 (128 x 5,120 bf16 values, 1,310,720 bytes, each GPU
    sending and receiving all of it once, in two steps) takes 1,310,720 / 16.002e9 s = 81.91 us plus
    2 x 20 us = 121.91 us; on the PCIe Gen5 figure (64 GB/s) with the generic 8 us a collective (a
    peer-to-peer server) 37.26 us."""
    from sim_core.config.predictor import RooflinePredictorConfig
    from sim_core.predictor.roofline import roofs_for

    rtx_4090, pro_6000 = DEVICES["rtx-4090"], DEVICES["rtx-pro-6000"]
    assert (rtx_4090.compute_efficiency, rtx_4090.memory_efficiency, rtx_4090.attention_memory_efficiency) == (
        0.98, 0.94, 0.87)
    assert (pro_6000.compute_efficiency, pro_6000.memory_efficiency, pro_6000.attention_memory_efficiency) == (
        0.74, 0.83, 0.74)
    roofs = roofs_for(pro_6000, RooflinePredictorConfig())
    assert roofs.link == pytest.approx(16.002e9)
    assert pro_6000.link_latency_s == 20e-6
    assert roofs.all_reduce(1_310_720, 2) * 1e6 == pytest.approx(121.91, abs=0.01)
    pcie = roofs_for(pro_6000.model_copy(update={"link_bandwidth_gbps": 64, "link_latency_s": None}),
                     RooflinePredictorConfig())
    assert pcie.all_reduce(1_310_720, 2) * 1e6 == pytest.approx(37.26, abs=0.01)
