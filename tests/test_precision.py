"""Number formats in the cost models and the device catalog: a quantized model's linear layers at
the weight format's bytes and (where the device has the math) its throughput, weight-only on a
device without it, attention's K and V at the KV format's bytes, 16-bit left exactly as it was,
and the catalog's FP8/FP4 figures. Expected values are worked by hand in each docstring."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim_core import ConfigError, parse_config
from sim_core.catalog import DEVICES, DeviceSpec, ModelSpec
from sim_core.catalog.precision import LinearFormat, linear_format
from sim_core.config import SimulationConfig
from sim_core.config.predictor import RooflinePredictorConfig
from sim_core.predictor import build_predictor
from sim_core.predictor import operators as ops
from sim_core.predictor.roofline import RooflinePredictor, Roofs
from sim_core.predictor.shape import BatchShape

# 100 / 200 TFLOPS BF16 / FP8 at half efficiency (50 / 100 TFLOP/s), 200 GB/s at full efficiency
TOY = DeviceSpec(name="toy", bf16_tflops=100, fp8_tflops=200, memory_gib=80, memory_bandwidth_gbps=200,
                 link_bandwidth_gbps=100, compute_efficiency=0.5, memory_efficiency=1.0)
# 2 layers, 8 query and 8 KV heads of 128 (hidden 1024), MLP 4096
TINY = ModelSpec(name="tiny", num_layers=2, num_q_heads=8, num_kv_heads=8, embedding_dim=1024,
                 mlp_hidden_dim=4096, vocab_size=4096)
TINY_FP8 = TINY.model_copy(update={"weight_dtype": "fp8"})
A100_COMPUTE, A100_BANDWIDTH = 312e12 * 0.7, 2039e9 * 0.8     # the catalog's A100-80GB roofs
H100_COMPUTE, H100_BANDWIDTH = 989e12 * 0.65, 3350e9 * 0.8


def toy_roofs(weight_dtype: str, device: DeviceSpec = TOY) -> Roofs:
    return Roofs(device, device.compute_efficiency, device.memory_efficiency, 0.7, linear_format(weight_dtype, device))


def roofline(model: ModelSpec, device: str = "a100-80gb", kv: str | None = None) -> RooflinePredictor:
    return RooflinePredictor(model, DEVICES[device], 1, 1, RooflinePredictorConfig(), kv)


# ---- which math a quantized model runs in -------------------------------------------------------

def test_fp8_weights_run_w8a8_where_the_device_has_fp8_and_weight_only_where_not():
    """H100 has FP8 tensor cores: W8A8. A100 has none: FP8 weights widened to BF16 (vLLM's Marlin
    path). FP4 runs as FP4 only on Blackwell (B200), weight-only on H100; 16-bit stays 16-bit."""
    assert linear_format("fp8", DEVICES["h100-sxm"]) == LinearFormat("fp8", "fp8")
    assert linear_format("fp8", DEVICES["a100-80gb"]) == LinearFormat("fp8", "bf16")
    assert linear_format("fp8", DEVICES["a100-80gb"]).weight_only
    assert linear_format("fp4", DEVICES["b200"]) == LinearFormat("fp4", "fp4")
    assert linear_format("fp4", DEVICES["h100-sxm"]) == LinearFormat("fp4", "bf16")
    assert linear_format("fp16", DEVICES["a100-80gb"]).is_16bit


# ---- one GEMM on the toy device -------------------------------------------------------------------

def test_a_bf16_gemm_is_the_smooth_maximum_of_its_flops_and_bytes():
    """1000 x 1000 x 1000: 2e9 FLOPs / 50 TFLOP/s = 40 us; 3e6 values x 2 B = 6e6 B / 200 GB/s =
    30 us; sqrt(40^2 + 30^2) = 50 us plus the 5 us launch."""
    assert toy_roofs("bf16").linear(ops.gemm(1000, 1000, 1000)) == pytest.approx(55e-6, rel=1e-12)


def test_a_w8a8_gemm_runs_at_the_fp8_throughput_on_one_byte_operands():
    """The same GEMM with FP8 weights: 2e9 FLOPs / (200 TFLOPS x 0.5) = 20 us; weights and input
    1 B each, output 2 B: 1e6 + 1e6 + 2e6 = 4e6 B / 200 GB/s = 20 us; sqrt(2) x 20 us + 5 us."""
    roofs = toy_roofs("fp8")
    cost = ops.gemm(1000, 1000, 1000)
    assert roofs.linear_bytes(cost) == 4e6
    assert roofs.linear(cost) == pytest.approx(math.sqrt(2) * 20e-6 + 5e-6, rel=1e-12)


def test_a_compute_bound_fp8_gemm_takes_flops_over_the_fp8_roof():
    """1e6 tokens through a 10000 x 10000 layer: 2e14 FLOPs / (200 TFLOPS x 0.5) = 2 s of compute
    (BF16: 4 s); 1e8 + 1e10 + 2e10 = 3.01e10 B / 200 GB/s = 0.1505 s of memory; sqrt(2^2 +
    0.1505^2) + 5 us = 2.00565 s, within 0.3% of FLOPs / (fp8_tflops x efficiency)."""
    cost = ops.gemm(1e6, 10_000, 10_000)
    assert toy_roofs("fp8").linear_flops == 200e12 * 0.5 and toy_roofs("bf16").linear_flops == 100e12 * 0.5
    assert toy_roofs("fp8").linear_bytes(cost) == 1e8 + 1e10 + 2e10
    expected = math.sqrt(2.0 ** 2 + 0.1505 ** 2) + 5e-6
    assert toy_roofs("fp8").linear(cost) == pytest.approx(expected, rel=1e-12)
    assert toy_roofs("fp8").linear(cost) == pytest.approx(2e14 / (200e12 * 0.5), rel=3e-3)


def test_weight_streaming_of_a_decode_gemm_halves_in_fp8():
    """One token through a 4096 x 4096 layer: bf16 moves 2 x (4096^2 + 4096 + 4096) B; fp8 moves
    the weights at 1 B (half: 4096^2 instead of 2 x 4096^2), the input at 1 B, the output at 2 B."""
    cost = ops.gemm(1, 4096, 4096)
    bf16, fp8 = toy_roofs("bf16").linear_bytes(cost), toy_roofs("fp8").linear_bytes(cost)
    assert bf16 == 2 * (4096 ** 2 + 4096 + 4096)
    assert fp8 == 4096 ** 2 + 4096 + 2 * 4096
    assert bf16 - fp8 == 4096 ** 2 + 4096      # half the weights, half the input


def test_weight_only_fp8_streams_one_byte_weights_and_computes_at_bf16():
    """No FP8 math: 2e9 FLOPs / 50 TFLOP/s = 40 us; weights 1e6 B, input and output 2e6 B each:
    5e6 B / 200 GB/s = 25 us; sqrt(40^2 + 25^2) us + 5 us."""
    roofs = toy_roofs("fp8", TOY.model_copy(update={"fp8_tflops": None}))
    assert roofs.linear_bytes(ops.gemm(1000, 1000, 1000)) == 5e6
    assert roofs.linear(ops.gemm(1000, 1000, 1000)) == pytest.approx(math.sqrt(40e-6 ** 2 + 25e-6 ** 2) + 5e-6,
                                                                       rel=1e-12)


# ---- the roofline predictor ----------------------------------------------------------------------

def test_an_fp8_model_on_a100_is_priced_weight_only():
    """TINY in fp8 on A100 (no FP8 math), 16 tokens through the output projection (k = n = 1024):
    2 x 16 x 1024^2 FLOPs at the BF16 roof (312 TFLOPS x 0.7); weights 1024^2 x 1 B, input and
    output 16 x 1024 x 2 B each: 1,114,112 B at 2,039 GB/s x 0.8."""
    predictor = roofline(TINY_FP8)
    assert predictor.roofs.format == LinearFormat("fp8", "bf16")
    flops, nbytes = 2 * 16 * 1024 * 1024, 1024 * 1024 + 2 * 16 * 1024 * 2
    expected = math.sqrt((flops / A100_COMPUTE) ** 2 + (nbytes / A100_BANDWIDTH) ** 2) + 5e-6
    assert predictor.kernel_times(np.array([16.0]))["attn_post_proj"][0] == pytest.approx(expected, rel=1e-12)


def test_an_fp8_model_on_h100_runs_its_gemms_at_the_fp8_roof():
    """TINY in fp8 on H100, 16 tokens through the output projection: FLOPs at 1,979 TFLOPS x 0.65;
    weights 1024^2 B, input 16 x 1024 x 1 B, output 16 x 1024 x 2 B."""
    flops, nbytes = 2 * 16 * 1024 * 1024, 1024 * 1024 + 16 * 1024 + 16 * 1024 * 2
    expected = math.sqrt((flops / (1979e12 * 0.65)) ** 2 + (nbytes / H100_BANDWIDTH) ** 2) + 5e-6
    assert roofline(TINY_FP8, "h100-sxm").kernel_times(np.array([16.0]))["attn_post_proj"][0] == \
        pytest.approx(expected, rel=1e-12)


def test_attention_a_quantization_left_16_bit_is_priced_16_bit():
    """TINY in fp8 with its attention left bf16 (Llama-4-Scout FP8's ignore list) on H100, 16
    tokens through the output projection: FLOPs at 989 TFLOPS x 0.65 and every operand 16-bit:
    weights 2 x 1024^2 B, input and output 2 x 16 x 1024 B each; its MLP stays fp8."""
    mixed = roofline(TINY_FP8.model_copy(update={"attention_weight_dtype": "bf16"}), "h100-sxm")
    flops, nbytes = 2 * 16 * 1024 * 1024, 2 * 1024 * 1024 + 2 * 2 * 16 * 1024
    expected = math.sqrt((flops / H100_COMPUTE) ** 2 + (nbytes / H100_BANDWIDTH) ** 2) + 5e-6
    times, fp8 = mixed.kernel_times(np.array([16.0])), roofline(TINY_FP8, "h100-sxm").kernel_times(np.array([16.0]))
    assert times["attn_post_proj"][0] == pytest.approx(expected, rel=1e-12)
    assert times["mlp_up_proj"][0] == fp8["mlp_up_proj"][0]

def test_the_router_and_the_lm_head_stay_16_bit():
    """A quantized checkpoint keeps its router and LM head 16-bit: their prices are the bf16
    model's, while the experts' projections change."""
    moe = TINY.model_copy(update={"num_experts": 4, "num_experts_per_token": 2})
    bf16, fp8 = roofline(moe, "h100-sxm"), roofline(moe.model_copy(update={"weight_dtype": "fp8"}), "h100-sxm")
    tokens = np.array([64.0])
    assert fp8.kernel_times(tokens)["moe_router"][0] == bf16.kernel_times(tokens)["moe_router"][0]
    assert fp8.kernel_times(tokens)["mlp_up_proj"][0] < bf16.kernel_times(tokens)["mlp_up_proj"][0]
    assert fp8.request_ops(np.array([8.0]), 0)["lm_head"][0] == bf16.request_ops(np.array([8.0]), 0)["lm_head"][0]


def test_decode_attention_reads_an_fp8_cache_at_one_byte():
    """4 decodes over 1,000 cached tokens (TINY on A100): 4 x 128 x 8 x 1000 = 4,096,000 FLOPs at
    the BF16 roof; K and V 2 x 1000 x 8 x 128 values at 1 B plus the queries 2 x 4 x 8 x 128 at
    2 B: 2,064,384 B."""
    expected = math.sqrt((4_096_000 / A100_COMPUTE) ** 2 + (2_064_384 / A100_BANDWIDTH) ** 2) + 5e-6
    predictor = roofline(TINY, kv="fp8")
    assert predictor.decode_scalar(4, 1000) == pytest.approx(expected, rel=1e-12)
    assert predictor.decode_attention(np.array([4.0]), np.array([1000.0]))[0] == predictor.decode_scalar(4, 1000)


def test_prefill_attention_reads_k_and_v_in_the_kv_format():
    """100 new tokens, nothing cached: 100 x 101 / 2 = 5,050 (query, key) pairs x 4 x 128 x 8 =
    20,684,800 FLOPs; queries read and output written 2 x 100 x 8 x 128 x 2 B = 409,600 B, K and V
    2 x 100 x 8 x 128 x 1 B = 204,800 B."""
    expected = math.sqrt((20_684_800 / A100_COMPUTE) ** 2 + (614_400 / A100_BANDWIDTH) ** 2) + 5e-6
    assert roofline(TINY, kv="fp8").prefill_attention(100, 0) == pytest.approx(expected, rel=1e-12)


def test_the_kv_cache_write_stores_fp8():
    """16 tokens: K and V read in 16 bits (2 x 16 x 8 x 128 x 2 B = 65,536 B) and stored at 1 B
    (32,768 B): memory-bound, 98,304 B / bandwidth plus the 2 us launch of a small kernel."""
    expected = 98_304 / A100_BANDWIDTH + 2e-6
    assert roofline(TINY, kv="fp8").kernel_times(np.array([16.0]))["attn_kv_cache_save"][0] == \
        pytest.approx(expected, rel=1e-12)


def test_16_bit_formats_price_exactly_as_before():
    """bf16 by default, bf16 named, fp16 weights with an fp16 cache: the same stage times to the bit."""
    shapes = [BatchShape(1, 100, ((100, 0),)), BatchShape(4, 4, (), 4, 4000), BatchShape(3, 60, ((57, 10),), 2, 900)]
    default = [roofline(TINY).stage_time(s, 0) for s in shapes]
    assert [roofline(TINY, kv="bf16").stage_time(s, 0) for s in shapes] == default
    fp16 = TINY.model_copy(update={"weight_dtype": "fp16"})
    assert [roofline(fp16, kv="fp16").stage_time(s, 0) for s in shapes] == default


# ---- the scenario picks a predictor that can price its formats -------------------------------------

def scenario(device: str, weight: str = "bf16", kv: str = "auto", **extra: object) -> dict:
    model = {**TINY.model_dump(), "weight_dtype": weight}
    return {"model": "tiny", "models": {"tiny": model}, "device": device, "cluster": {"kv_cache_dtype": kv}, **extra}


def test_the_default_predictor_is_silicon_only_where_the_formats_were_measured():
    """H100 tables hold fp8 GEMMs and fp8-KV attention: silicon. A100's hold neither: roofline for
    an fp8 model or an fp8 cache. Only B200's hold FP4 GEMMs: silicon there, roofline on H100."""
    def kind(**kwargs: str) -> str:
        return SimulationConfig.model_validate(scenario(**kwargs)).predictor.type

    assert kind(device="h100-sxm", weight="fp8") == "silicon"
    assert kind(device="h100-sxm", kv="fp8") == "silicon"
    assert kind(device="a100-80gb") == "silicon"
    assert kind(device="a100-80gb", weight="fp8") == "roofline"
    assert kind(device="a100-80gb", kv="fp8") == "roofline"
    assert kind(device="b200", weight="fp4") == "silicon"
    assert kind(device="h100-sxm", weight="fp4") == "roofline"


def test_silicon_named_for_unmeasured_formats_is_one_line_saying_why():
    with pytest.raises(ConfigError, match=r"predictor.type: silicon cannot price this scenario: its tables for "
                                          r"'a100-80gb' measure bf16 GEMMs, not fp8 weights; use roofline"):
        parse_config(scenario("a100-80gb", weight="fp8", predictor={"type": "silicon"}))
    with pytest.raises(ConfigError, match=r"measure attention over a bf16 KV cache, not fp8; use roofline"):
        parse_config(scenario("a100-80gb", kv="fp8", predictor={"type": "silicon"}))
    with pytest.raises(ConfigError, match=r"'h100-sxm' measure bf16/fp8 GEMMs, not fp4 weights"):
        parse_config(scenario("h100-sxm", weight="fp4", predictor={"type": "silicon"}))


def test_build_predictor_passes_the_resolved_kv_format():
    """cluster.kv_cache_dtype fp8 reaches the roofline; auto on an fp8 model resolves to bf16."""
    assert build_predictor(parse_config(scenario("a100-80gb", kv="fp8"))).kv_cache_dtype == "fp8"
    assert build_predictor(parse_config(scenario("a100-80gb", weight="fp8"))).kv_cache_dtype == "bf16"


# ---- the device catalog --------------------------------------------------------------------------

AMPERE = {"a100-40gb", "a100-80gb", "a30", "a40"}
FP4 = {"b200", "b300", "gb200", "rtx-pro-6000", "mi355x"}
# nvidia-smi's total in MiB, as public prints of each GPU show it (docs/design/precision.md)
DRIVER_MIB = {"h100-pcie": 81_559, "h20": 97_871, "gh200": 97_871, "b300": 275_040, "gb200": 189_471,
              "rtx-pro-6000": 97_887}


def test_fp8_and_fp4_math_are_where_the_architectures_have_them():
    """Ampere has neither; Ada, Hopper, CDNA 3 have FP8; Blackwell and CDNA 4 also FP4."""
    assert {d for d, spec in DEVICES.items() if spec.fp8_tflops is None} == AMPERE
    assert {d for d, spec in DEVICES.items() if spec.fp4_tflops is not None} == FP4


def test_dense_fp8_is_twice_bf16_and_fp4_twice_fp8_except_blackwell_ultra():
    """Datasheet figures, dense: FP8 = 2 x BF16 within rounding (L40S: 733 / 362 = 2.02); FP4 =
    2 x FP8, and 3 x on B300 (13.5 / 4.5 PFLOPS). A sparse figure typed as dense would break it."""
    for device, spec in DEVICES.items():
        if spec.fp8_tflops is not None:
            assert 1.99 <= spec.fp8_tflops / spec.bf16_tflops <= 2.03, device
        if spec.fp4_tflops is not None:
            assert spec.fp4_tflops / spec.fp8_tflops == (3.0 if device == "b300" else 2.0), device


def test_new_devices_give_the_memory_the_driver_reports():
    """memory_gib is nvidia-smi's MiB / 1024 to two decimals (MI325X and MI355X: ROCm's 256 and
    288 GiB exactly); fp16 math is the bf16 figure."""
    for device, mib in DRIVER_MIB.items():
        assert DEVICES[device].memory_gib == round(mib / 1024, 2), device
    assert (DEVICES["mi325x"].memory_gib, DEVICES["mi355x"].memory_gib) == (256, 288)
    assert DEVICES["h20"].tensor_tflops("fp16") == DEVICES["h20"].bf16_tflops == 148


def test_a_scenario_device_with_a_tiny_fp8_rate_is_refused():
    slow = {"name": "slow", "bf16_tflops": 100, "fp8_tflops": 1e-300, "memory_gib": 80,
            "memory_bandwidth_gbps": 100, "link_bandwidth_gbps": 100}
    with pytest.raises(ConfigError, match=r"devices.slow.fp8_tflops: got 1e-300; allowed a finite value of at least"):
        parse_config({"device": "slow", "devices": {"slow": slow}})


def test_benchmark_gpu_names_map_to_the_new_devices():
    """Hardware names as nvidia-smi and rocm-smi print them; H100 PCIe is not the SXM part, an H20
    not an H200, a GH200 or GB200 not an H200 or B200."""
    from sim_core.accuracy.server import device_of

    names = {"NVIDIA H100 PCIe": "h100-pcie", "NVIDIA H100 80GB HBM3": "h100-sxm", "NVIDIA H20": "h20",
             "NVIDIA H200": "h200", "NVIDIA GH200 480GB": "gh200", "NVIDIA GB200": "gb200",
             "NVIDIA B300 SXM6 AC": "b300", "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx-pro-6000",
             "AMD Instinct MI325X": "mi325x", "AMD Instinct MI355X": "mi355x"}
    assert {name: device_of(name) for name in names} == names
