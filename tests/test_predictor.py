"""Cost models: linear as specified; roofline monotone, TP-aware, and its run times exact."""

import numpy as np
import pytest

from sim_core import parse_config
from sim_core.predictor import BatchShape, LinearPredictor, build_predictor


def test_linear_cost_is_base_plus_tokens_on_every_stage():
    predictor = LinearPredictor(0.005, 0.0001)
    shape = BatchShape(3, 1200)
    assert predictor.stage_time(shape, 0) == predictor.stage_time(shape, 1) == 0.005 + 0.0001 * 1200


def roofline(**cluster):
    return build_predictor(parse_config({"cluster": cluster}))


def test_roofline_grows_with_tokens_and_context():
    predictor = roofline()
    short, long = BatchShape(1, 256, ((256, 0),)), BatchShape(1, 2048, ((2048, 0),))
    assert predictor.stage_time(long, 0) > predictor.stage_time(short, 0)
    small, large = BatchShape(8, 8, (), 8, 8 * 500), BatchShape(8, 8, (), 8, 8 * 3000)
    assert predictor.stage_time(large, 0) > predictor.stage_time(small, 0)


def test_a_decode_step_of_llama2_7b_on_a100_is_memory_bound_and_plausible():
    """32 decodes x 1000 tokens of context read ~16 GiB of KV plus ~13 GB of weights per step:
    tens of milliseconds on an 80 GB A100 (2 TB/s)."""
    time = roofline().stage_time(BatchShape(32, 32, (), 32, 32_000), 0)
    assert 0.015 < time < 0.04


def test_tensor_parallelism_shortens_a_prefill():
    shape = BatchShape(1, 4096, ((4096, 0),))
    assert roofline(tensor_parallel_size=2).stage_time(shape, 0) < roofline().stage_time(shape, 0)


def test_breakdown_names_the_operators_and_sums_to_the_stage_time():
    predictor = roofline(tensor_parallel_size=2, pipeline_parallel_size=2)
    shape = BatchShape(4, 515, ((512, 0),), 3, 3 * 700)
    parts = predictor.breakdown(shape, 0)
    assert {"attn_pre_proj", "attn_prefill", "attn_decode", "mlp_up_proj", "tp_all_reduce", "pp_send_recv",
            "cpu_schedule", "cpu_prepare_inputs", "cpu_sample", "cpu_process_outputs"} <= set(parts)
    assert sum(parts.values()) == pytest.approx(predictor.stage_time(shape, 0), rel=1e-12)
    assert "lm_head" in predictor.breakdown(shape, 1) and "pp_send_recv" not in predictor.breakdown(shape, 1)


def test_cpu_overhead_is_split_into_the_four_host_phases_of_an_iteration():
    cpu = {"cpu_schedule_s": 0.001, "cpu_schedule_per_request_s": 0.0001, "cpu_prepare_inputs_s": 0.002,
           "cpu_prepare_inputs_per_request_s": 0.0, "cpu_sample_s": 0.0005, "cpu_sample_per_request_s": 0.00002,
           "cpu_process_outputs_s": 0.003, "cpu_process_outputs_per_request_s": 0.00001}
    predictor = build_predictor(parse_config({"predictor": cpu}))
    # 10 requests: schedule 1 ms + 10 x 0.1 ms, prepare 2 ms, sample 0.5 ms + 10 x 20 us, process 3 ms + 10 x 10 us
    assert predictor.cpu_times(10) == pytest.approx({"cpu_schedule": 0.002, "cpu_prepare_inputs": 0.002,
                                                    "cpu_sample": 0.0007, "cpu_process_outputs": 0.0031})
    parts = predictor.breakdown(BatchShape(10, 10, (), 10, 5000), 0)
    assert parts["cpu_schedule"] == pytest.approx(0.002) and parts["cpu_process_outputs"] == pytest.approx(0.0031)


def test_the_engine_host_scale_multiplies_every_host_phase():
    """The generic phases at 10 requests: schedule 0.5 ms + 10 x 5 us = 0.55 ms, prepare 1.55,
    sample 1.05, process 1.05. vllm_v1 runs them at its host_scale (default 0.44: sample
    0.462 ms; at 0.5: 0.525 ms), on the scenario's own knobs too (sample 2 ms + 10 x 5 us at 0.5 =
    1.025 ms); Vidur's vllm policy takes them as given."""
    def cpu(scheduler, predictor=None):
        scenario = {"scheduler": scheduler, "predictor": {"type": "roofline", **(predictor or {})}}
        return build_predictor(parse_config(scenario)).cpu_times(10)

    assert cpu({"type": "vllm"}) == pytest.approx({"cpu_schedule": 0.00055, "cpu_prepare_inputs": 0.00155,
                                                  "cpu_sample": 0.00105, "cpu_process_outputs": 0.00105})
    assert cpu({"type": "vllm_v1"})["cpu_sample"] == pytest.approx(0.000462)
    assert cpu({"type": "vllm_v1", "host_scale": 0.5}) == pytest.approx(
        {"cpu_schedule": 0.000275, "cpu_prepare_inputs": 0.000775, "cpu_sample": 0.000525,
         "cpu_process_outputs": 0.000525})
    assert cpu({"type": "vllm_v1", "host_scale": 0.5}, {"cpu_sample_s": 0.002})["cpu_sample"] == pytest.approx(0.001025)


def test_decode_run_times_equal_stage_time_bit_for_bit():
    """Fast-forward prices many iterations at once; each must equal the one-at-a-time price."""
    predictor = roofline()
    counts = np.array([5, 5, 4, 4, 2])
    context = np.array([100, 105, 96, 100, 60])
    run = predictor.decode_run_times(counts, context, 0)
    single = [predictor.stage_time(BatchShape(int(n), int(n), (), int(n), int(c)), 0) for n, c in zip(counts, context)]
    assert run.tolist() == single


def test_decode_attention_reads_the_local_layers_window_of_cached_tokens():
    """Decode attention over a sliding window reads the K and V of min(context, decodes x window)
    cached tokens in a local layer and of all of them in a global one. A 2-layer model (4 KV heads
    of 16: 2 x 4 x 16 = 128 cached values, 256 bytes a token and layer) on a 1 TB/s, 100 TFLOP/s
    device at full efficiency, 2 decodes over 1,000 cached tokens: 256 x 1,000 bytes of K and V
    (0.256 us) plus the 2 queries' 2 x 4 x (16 + 16) values (512 bytes), 256 FLOPs a token
    (2.56 ns), plus the 5 us launch. A window of 4,096 covers every cached token, so it costs the
    same; a window of 100 caps each layer at 2 x 100 = 200 tokens; with layer 1 global the average
    layer reads (1,000 + 200) / 2 = 600. (Before, the per-token unit was taken with no decodes, so
    the local layers read nothing and an all-local model's decode attention was free.)"""
    from sim_core.catalog import DeviceSpec, ModelSpec
    from sim_core.config.predictor import RooflinePredictorConfig
    from sim_core.predictor.roofline import GEMM_LAUNCH_S, RooflinePredictor

    tiny = {"name": "tiny", "num_layers": 2, "num_q_heads": 4, "num_kv_heads": 4, "head_dim": 16,
            "embedding_dim": 64, "mlp_hidden_dim": 32, "vocab_size": 100}
    device = DeviceSpec(name="round", bf16_tflops=100, memory_gib=80, memory_bandwidth_gbps=1000,
                        link_bandwidth_gbps=100)
    cfg = RooflinePredictorConfig(compute_efficiency=1.0, memory_efficiency=1.0)

    def decode(context: float, **window) -> float:
        predictor = RooflinePredictor(ModelSpec(**tiny, **window), device, 1, 1, cfg)
        return float(predictor.decode_attention(np.array([2.0]), np.array([context]))[0])

    def expected(tokens: float) -> float:
        return float(np.hypot(256 * tokens / 1e14, (256 * tokens + 512) / 1e12)) + GEMM_LAUNCH_S

    assert decode(1000) == pytest.approx(expected(1000), rel=1e-12)
    assert decode(1000, attention_window=4096) == pytest.approx(expected(1000), rel=1e-12)
    assert decode(1000, attention_window=100) == pytest.approx(expected(200), rel=1e-12)
    assert decode(1000, attention_window=100, full_attention_layers=(1,)) == pytest.approx(expected(600), rel=1e-12)


def test_a_prefill_chunk_reads_the_windows_keys_from_an_fp8_cache_at_one_byte():
    """A 10-token chunk over 1,000 cached tokens in an all-local model (window 100; 4 heads of 16,
    128 cached values a token) sees min(1,000, 100) + 10 = 110 keys: 2 x (10 x 4 x 32 + 110 x
    128) = 30,720 bytes at 16 bits, of which the 2 x 128 x 110 = 28,160 of K and V come from an
    fp8 cache at half that: 16,640 bytes (before, the window zeroed the cache reads and all
    30,720 were charged). Each query sees 100 keys: 1,000 pairs x 2 x 32 x 4 = 256,000 FLOPs.
    On 1 TB/s and 100 TFLOP/s: hypot(2.56 ns, 16.64 ns) + the 5 us launch."""
    from sim_core.catalog import DeviceSpec, ModelSpec
    from sim_core.config.predictor import RooflinePredictorConfig
    from sim_core.predictor.roofline import GEMM_LAUNCH_S, RooflinePredictor

    model = ModelSpec(name="tiny", num_layers=2, num_q_heads=4, num_kv_heads=4, head_dim=16, embedding_dim=64,
                      mlp_hidden_dim=32, vocab_size=100, attention_window=100)
    device = DeviceSpec(name="round", bf16_tflops=100, memory_gib=80, memory_bandwidth_gbps=1000,
                        link_bandwidth_gbps=100)
    cfg = RooflinePredictorConfig(compute_efficiency=1.0, memory_efficiency=1.0)
    predictor = RooflinePredictor(model, device, 1, 1, cfg, kv_cache_dtype="fp8")
    assert predictor.prefill_attention(10, 1000) == pytest.approx(float(np.hypot(2.56e-9, 1.664e-8)) + GEMM_LAUNCH_S,
                                                                   rel=1e-12)


def test_attention_reads_the_kv_cache_at_the_devices_own_memory_efficiency():
    """A device whose attention reads the paged KV cache slower than its GEMMs stream weights
    (`attention_memory_efficiency`, measured apart on the RTX GPUs): the tiny model above (256
    bytes of K and V a cached token and layer, 256 FLOPs a cached token a decode) on a 1 TB/s,
    100 TFLOP/s device at compute efficiency 1.0, memory 0.8, attention 0.5.
    2 decodes over 1,000 cached tokens move 256,512 bytes at 0.5 TB/s: 0.513024 us, beside
    256,000 FLOPs at 100 TFLOP/s (2.56 ns), plus the 5 us launch. A 10-token prefill chunk over
    1,000 cached tokens reads 2 x (10 x 4 x 32 + 1,010 x 128) = 261,120 bytes at 0.5 TB/s
    (0.52224 us) and does 2 x 32 x 4 x (10 x 1,000 + 55) = 2,574,080 FLOPs (25.7408 ns). A GEMM
    stays at 0.8: the scenario's memory_efficiency 0.4 halves both (attention 0.25, the measured
    ratio 0.5 / 0.8 kept), and without the field attention runs at memory_efficiency."""
    from sim_core.catalog import DeviceSpec, ModelSpec
    from sim_core.config.predictor import RooflinePredictorConfig
    from sim_core.predictor.roofline import GEMM_LAUNCH_S, RooflinePredictor

    model = ModelSpec(name="tiny", num_layers=2, num_q_heads=4, num_kv_heads=4, head_dim=16, embedding_dim=64,
                      mlp_hidden_dim=32, vocab_size=100)
    device = DeviceSpec(name="round", bf16_tflops=100, memory_gib=80, memory_bandwidth_gbps=1000,
                        link_bandwidth_gbps=100, compute_efficiency=1.0, memory_efficiency=0.8,
                        attention_memory_efficiency=0.5)
    predictor = RooflinePredictor(model, device, 1, 1, RooflinePredictorConfig())
    decode = float(predictor.decode_attention(np.array([2.0]), np.array([1000.0]))[0])
    assert decode == pytest.approx(float(np.hypot(2.56e-9, 256_512 / 0.5e12)) + GEMM_LAUNCH_S, rel=1e-12)
    assert predictor.decode_scalar(2, 1000) == decode
    prefill = float(np.hypot(2_574_080 / 1e14, 261_120 / 0.5e12)) + GEMM_LAUNCH_S
    assert predictor.prefill_attention(10, 1000) == pytest.approx(prefill, rel=1e-12)
    assert predictor.roofs.bandwidth == 0.8e12 and predictor.kv_roofs.bandwidth == 0.5e12

    halved = RooflinePredictor(model, device, 1, 1, RooflinePredictorConfig(memory_efficiency=0.4))
    assert (halved.roofs.bandwidth, halved.kv_roofs.bandwidth) == (pytest.approx(0.4e12), pytest.approx(0.25e12))
    plain = RooflinePredictor(model, device.model_copy(update={"attention_memory_efficiency": None}), 1, 1,
                              RooflinePredictorConfig())
    assert plain.kv_roofs is plain.roofs
