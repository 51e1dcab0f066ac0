"""The silicon predictor: measured kernel tables interpolated in log space, the cached-prefix
attention rule, and the GridPredictor contract. Hand-made tables keep the expected values
computable by hand; a few tests read the shipped tables (part of the project)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sim_core import ConfigError, parse_config
from sim_core.catalog import DEVICES, MODELS, ModelSpec
from sim_core.config.predictor import SiliconPredictorConfig
from sim_core.predictor import build_predictor, has_silicon_data
from sim_core.predictor.shape import BatchShape
from sim_core.predictor.silicon import AttentionLookup, SiliconPredictor
from sim_core.predictor.silicon_tables import DATA_DIR, AttentionTable, DeviceTables, LogGrid

MS = 1e-3
# 2 layers, 8 query and 8 KV heads of 128, hidden 1024: per GPU at TP 1 the context table's
# (8, 8, 128) grid prices prefill directly; the decode table only has 2 KV heads, so 8 KV heads
# fold into 4x the batch on the (2, 2, 128) grid
TINY = ModelSpec(name="tiny", num_layers=2, num_q_heads=8, num_kv_heads=8, embedding_dim=1024,
                 mlp_hidden_dim=4096, vocab_size=4096)
TINY_MOE = TINY.model_copy(update={"name": "tiny-moe", "num_experts": 4, "num_experts_per_token": 2})


def gemm_grid() -> LogGrid:
    """1, 2 and 8 x 10 us at m = 1, 4, 16, the same for every n and k."""
    seconds = np.array([1e-5, 2e-5, 8e-5])[:, None, None] * np.ones((3, 2, 2))
    return LogGrid([np.array([1, 4, 16]), np.array([128, 65536]), np.array([128, 65536])], seconds)


def tables() -> DeviceTables:
    context = LogGrid([np.array([1, 2]), np.array([1, 16, 256, 4096])],
                      np.array([[0.01, 0.02, 0.08, 2.56], [0.02, 0.04, 0.16, 5.12]]) * MS, (1.0, 2.0))
    decode_2 = LogGrid([np.array([1, 4, 16]), np.array([1, 15, 255, 4095])],
                       np.array([[0.01, 0.01, 0.02, 0.04], [0.012, 0.012, 0.03, 0.08], [0.02, 0.02, 0.06, 0.2]]) * MS)
    decode_4 = LogGrid(decode_2.axes, np.exp(decode_2.log_seconds) * 3)
    bytes_axis = np.array([1024, 8192, 64 * 2 ** 20])
    return DeviceTables(
        "test", {}, {"bf16": gemm_grid()},
        AttentionTable({(8, 8, 128): context}), AttentionTable({(2, 2, 128): decode_2, (4, 2, 128): decode_4}),
        {2: LogGrid([bytes_axis], np.array([5e-6, 6e-6, 1e-3]))},
        {2: LogGrid([bytes_axis[[0, 2]]], np.array([2e-5, 5e-4]))},
        {(1024, 4096, 2, 4, 1): LogGrid([np.array([1, 64])], np.array([3e-5, 9e-5]))})


def predictor(model: ModelSpec = TINY, tp: int = 1, pp: int = 1) -> SiliconPredictor:
    return SiliconPredictor(model, "test", DEVICES["h100-sxm"], tp, pp, SiliconPredictorConfig(), tables())


def test_on_a_grid_point_the_grid_gives_the_measured_latency():
    """(4, 128, 65536) is a grid point: 20 us, the stored value itself (scalar path) and in the
    array path; between n and k points it is the same 20 us (the grid is flat in them)."""
    grid = gemm_grid()
    assert grid.at(4, 128, 65536) == 2e-5
    assert grid.grid(np.array([4.0]), 128, 65536)[0] == pytest.approx(2e-5, rel=1e-12)
    assert grid.at(4, 4096, 1024) == pytest.approx(2e-5, rel=1e-12)


def test_halfway_in_log_m_is_the_geometric_mean():
    """m = 8 is halfway between 4 and 16 in log m: sqrt(20 us x 80 us) = 40 us."""
    grid = gemm_grid()
    assert grid.at(8, 4096, 1024) == pytest.approx(4e-5, rel=1e-12)
    assert grid.grid(np.array([8.0]), 4096.0, 1024.0)[0] == pytest.approx(4e-5, rel=1e-12)


def test_beyond_the_largest_m_time_is_linear_and_below_the_smallest_it_is_flat():
    """m = 64 is 4x the largest (16): 4 x 80 us; m = 0 takes the m = 1 floor, 10 us."""
    grid = gemm_grid()
    assert grid.at(64, 4096, 1024) == pytest.approx(32e-5, rel=1e-12)
    assert grid.at(0, 128, 128) == 1e-5
    assert grid.grid(np.array([64.0, 0.0]), 4096, 1024).tolist() == pytest.approx([32e-5, 1e-5], rel=1e-12)


def test_kv_heads_beyond_the_table_fold_into_the_batch():
    """8 KV heads on a table with 2: a batch of 1 runs as a batch of 4 on the (2, 2) grid."""
    lookup = AttentionLookup.of(tables().generation, 8, 8, 128)
    assert lookup.batch_factor == 4
    assert lookup.at(1, 255) == 0.03 * MS     # the (batch 4, step 255) point


def test_query_heads_between_measured_ones_interpolate_linearly():
    """3 query heads over 2 KV heads: halfway between the (2, 2) and (4, 2) grids (x1 and x3):
    at batch 1, step 1, (0.01 + 0.03) / 2 ms; head_dim 64 on a 128 table halves it."""
    table = tables().generation
    assert AttentionLookup.of(table, 3, 2, 128).at(1, 1) == pytest.approx(0.02 * MS, rel=1e-12)
    assert AttentionLookup.of(table, 3, 2, 64).at(1, 1) == pytest.approx(0.01 * MS, rel=1e-12)


def test_a_prefill_chunk_with_nothing_cached_is_the_context_table():
    """16 new tokens, nothing cached: the context table at (1, 16), 0.02 ms per layer, of which
    the step's attention launch (the 0.01 ms floor, charged once) and 0.01 ms the chunk adds."""
    silicon = predictor()
    assert silicon.attention_floor == 0.01 * MS
    assert silicon.chunk_attention(16, 0) == 0.02 * MS
    parts = silicon.breakdown(BatchShape(1, 16, ((16, 0),)), 0)
    assert parts["attn_prefill"] + parts["attn_launch"] == pytest.approx(2 * 0.02 * MS, rel=1e-12)


def test_a_short_chunk_over_a_long_cached_prefix_costs_reading_the_cache():
    """1 new token over 255 cached: the pair share, 256 / (256 x 257 / 2) of the isl-256 prompt
    (0.08 ms), is 0.00062 ms; reading the cache like one decode over 255 tokens (batch 4 on the
    folded grid) is 0.03 ms; the chunk alone 0.01 ms: the largest, 0.03 ms."""
    assert predictor().chunk_attention(1, 255) == 0.03 * MS


def test_a_long_chunk_over_a_short_prefix_is_its_share_of_the_whole_prompt():
    """4080 new tokens over 16 cached: of the isl-4096 prompt's 4096 x 4097 / 2 = 8,390,656
    (query, key) pairs the chunk computes 4080 x 16 + 4080 x 4081 / 2 = 8,390,520: 2.56 ms x that
    share, more than the decode-like read (~0.012 ms) or the chunk alone (~2.55 ms)."""
    assert predictor().chunk_attention(4080, 16) == pytest.approx(2.56 * MS * 8_390_520 / 8_390_656, rel=1e-12)


def test_decode_at_a_grid_point_is_the_table_above_the_launch():
    """4 decodes holding 1,020 cached tokens: mean 255 each; batch 16 on the folded grid is
    0.06 ms, of which 0.05 ms above the 0.01 ms launch."""
    assert predictor().decode_scalar(4, 1020) == pytest.approx(0.05 * MS, rel=1e-12)


def test_gemms_follow_the_per_gpu_shapes_and_the_breakdown_sums_to_the_stage_time():
    """16 tokens: every GEMM is the 80 us m = 16 point; the LM head of 2 requests is 10 x 2^(1/2)
    us (halfway in log m from 1 to 4 is sqrt(10 x 20)); the parts sum to the stage time."""
    silicon = predictor()
    shape = BatchShape(2, 16, ((15, 0),), 1, 100)
    parts = silicon.breakdown(shape, 0)
    for name in ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"):
        assert parts[name] == pytest.approx(2 * 8e-5, rel=1e-12)
    assert parts["lm_head"] == pytest.approx(np.sqrt(1e-5 * 2e-5), rel=1e-12)
    assert sum(parts.values()) == pytest.approx(silicon.stage_time(shape, 0), rel=1e-12)


def test_host_phases_are_the_rooflines():
    """cpu_times read the same knobs as the roofline: 0.5 ms + 5 us per request to schedule."""
    assert predictor().cpu_times(4)["cpu_schedule"] == pytest.approx(0.0005 + 4 * 0.000005, rel=1e-12)


def test_decode_run_times_equal_stage_time_bit_for_bit():
    """The fast decode path prices each iteration exactly as stage_time does."""
    silicon = predictor()
    counts = np.array([1, 4, 7, 64, 300])
    context = np.array([10, 1020, 3000, 38400, 1_500_000])
    single = [silicon.stage_time(BatchShape(int(n), int(n), (), int(n), int(c)), 0) for n, c in zip(counts, context)]
    assert silicon.decode_run_times(counts, context, 0).tolist() == single


def test_tp_all_reduce_uses_custom_up_to_8_mib_and_nccl_above():
    """TP 2, hidden 1024 (2 KiB a token): 4 tokens = 8 KiB, the custom table's 6 us; 32,768
    tokens = 64 MiB, NCCL's 0.5 ms; two all-reduces per layer."""
    ops = predictor(tp=2).layer_ops(np.array([4.0, 32768.0]))
    assert ops["tp_all_reduce"].tolist() == pytest.approx([2 * 6e-6, 2 * 5e-4], rel=1e-12)


def test_a_moe_shape_in_the_table_is_priced_by_it_and_another_by_the_roofline():
    """(1024, 4096, top-2, 4 experts, TP 1) is in the table: 64 tokens take its 90 us; with 8
    experts it is not, and the roofline prices the experts."""
    ops = predictor(TINY_MOE).layer_ops(np.array([64.0]))
    assert ops["mlp_experts"][0] == pytest.approx(9e-5, rel=1e-12)
    other = TINY_MOE.model_copy(update={"num_experts": 8})
    ops = predictor(other).layer_ops(np.array([64.0]))
    assert "mlp_experts" not in ops and ops["mlp_up_proj"][0] > 0


def test_a_device_without_data_is_a_config_error_naming_it_and_those_with_data():
    """L40S has data, the A40 none: asking for silicon on the A40 is refused when the scenario is
    validated, naming both (and so is an H100 the scenario redefines: no measurements of it)."""
    assert has_silicon_data("l40s") and not has_silicon_data("a40")
    with pytest.raises(ConfigError, match=r"predictor.type: silicon has measured kernels only for .*h100-sxm.*"
                                          r"not 'a40'; use roofline"):
        parse_config({"device": "a40", "predictor": {"type": "silicon"}})
    mine = {"h100-sxm": {"name": "mine", "bf16_tflops": 900, "memory_gib": 80, "memory_bandwidth_gbps": 3000,
                         "link_bandwidth_gbps": 400}}
    with pytest.raises(ConfigError, match=r"not 'h100-sxm'"):
        parse_config({"device": "h100-sxm", "devices": mine, "predictor": {"type": "silicon"}})


def test_the_shipped_h100_table_prices_a_grid_gemm_as_measured():
    """Llama-2-7B on H100, 4096 tokens: the O projection is the shipped (4096, 4096, 4096) bf16
    point, read from the file itself (ms, float32)."""
    with np.load(DATA_DIR / "h100-sxm.npz") as data:
        m, n, k = (list(data[f"gemm_bf16_{axis}"]) for axis in "mnk")
        measured = float(data["gemm_bf16_ms"][m.index(4096), n.index(4096), k.index(4096)]) * MS
    config = parse_config({"device": "h100-sxm", "predictor": {"type": "silicon"}})
    silicon = build_predictor(config)
    assert isinstance(silicon, SiliconPredictor) and silicon.model == MODELS["llama-2-7b"]
    assert silicon.gemm.at(4096, 4096, 4096) == measured
    assert silicon.layer_ops(np.array([4096.0]))["attn_post_proj"][0] == pytest.approx(measured, rel=1e-12)


def test_the_catalog_lists_exactly_the_devices_with_shipped_tables():
    """MEASURED_KERNELS (what the scenario's default predictor consults) names the devices whose
    tables ship, no more and no fewer."""
    from sim_core.catalog.devices import MEASURED_KERNELS
    from sim_core.predictor import silicon_devices

    assert list(MEASURED_KERNELS) == silicon_devices()


def test_a_scenario_naming_no_predictor_gets_silicon_where_kernels_were_measured():
    """H100: silicon; A100-40GB (no measurements): roofline; an H100 the scenario redefines under
    `devices`: roofline; knobs without a type keep the choice; a named type is kept."""
    from sim_core.config import SimulationConfig

    def kind(**scenario):
        return SimulationConfig.model_validate(scenario).predictor.type

    assert kind(device="h100-sxm") == "silicon"
    assert kind(device="a100-40gb") == "roofline"
    devices = {"h100-sxm": {"name": "mine", "bf16_tflops": 900, "memory_gib": 80, "memory_bandwidth_gbps": 3000,
                            "link_bandwidth_gbps": 400}}
    assert kind(device="h100-sxm", devices=devices) == "roofline"
    assert kind(device="l40s", predictor={"cpu_sample_s": 0.002}) == "silicon"
    assert kind(device="h100-sxm", predictor={"type": "roofline"}) == "roofline"


# ---- number formats ------------------------------------------------------------------------------

def fp8_tables() -> DeviceTables:
    """tables() plus an fp8 GEMM grid at half the bf16 latencies and fp8-KV attention at half."""
    base = tables()

    def halved(grid: LogGrid) -> LogGrid:
        return LogGrid(grid.axes, np.exp(grid.log_seconds) / 2, grid.powers)

    return DeviceTables(base.device, {}, {"bf16": base.gemm["bf16"], "fp8": halved(base.gemm["bf16"])},
                        base.context, base.generation, base.allreduce, base.nccl, base.moe,
                        AttentionTable({key: halved(g) for key, g in base.context.grids.items()}),
                        AttentionTable({key: halved(g) for key, g in base.generation.grids.items()}))


def test_an_fp8_model_prices_its_linear_layers_on_the_fp8_gemm_table_and_the_lm_head_on_bf16():
    """16 tokens: each linear layer is the fp8 grid's m = 16 point, 40 us (the bf16 one is 80 us);
    the LM head of 2 requests stays on the bf16 grid, sqrt(10 x 20) us."""
    fp8 = TINY.model_copy(update={"weight_dtype": "fp8"})
    silicon = SiliconPredictor(fp8, "test", DEVICES["h100-sxm"], 1, 1, SiliconPredictorConfig(), fp8_tables())
    ops = silicon.layer_ops(np.array([16.0]))
    for name in ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"):
        assert ops[name][0] == pytest.approx(4e-5, rel=1e-12)
    assert silicon.request_ops(np.array([2.0]), 0)["lm_head"][0] == pytest.approx(np.sqrt(1e-5 * 2e-5), rel=1e-12)


def test_an_fp8_kv_cache_prices_attention_on_the_fp8_kv_tables():
    """The fp8-KV tables are the bf16 ones halved: the launch floor is 0.005 ms, and 4 decodes over
    1,020 cached tokens (batch 16 at step 255 on the folded grid, 0.03 ms) add 0.025 ms."""
    silicon = SiliconPredictor(TINY, "test", DEVICES["h100-sxm"], 1, 1, SiliconPredictorConfig(), fp8_tables(),
                               kv_cache_dtype="fp8")
    assert silicon.attention_floor == pytest.approx(0.005 * MS, rel=1e-12)
    assert silicon.decode_scalar(4, 1020) == pytest.approx(0.025 * MS, rel=1e-12)


def test_tables_without_the_scenarios_formats_are_refused_saying_which():
    fp8 = TINY.model_copy(update={"weight_dtype": "fp8"})
    with pytest.raises(ConfigError, match=r"the tables of 'test' have no fp8 GEMMs \(measured: bf16\)"):
        SiliconPredictor(fp8, "test", DEVICES["h100-sxm"], 1, 1, SiliconPredictorConfig(), tables())
    with pytest.raises(ConfigError, match=r"the tables of 'test' have no attention over a KV cache in fp8"):
        SiliconPredictor(TINY, "test", DEVICES["h100-sxm"], 1, 1, SiliconPredictorConfig(), tables(),
                         kv_cache_dtype="fp8")


def test_the_catalog_names_the_formats_the_shipped_tables_measure():
    """MEASURED_KERNELS' weight formats are the GEMM tables in each file, and its KV formats the
    attention tables there (fp8 KV everywhere but A100)."""
    from sim_core.catalog.devices import MEASURED_KERNELS
    from sim_core.predictor.silicon_tables import load_tables

    for device, formats in MEASURED_KERNELS.items():
        shipped = load_tables(device)
        assert sorted(formats.weights) == sorted(shipped.gemm), device
        assert sorted(formats.kv_cache) == [kv for kv in ("bf16", "fp8") if shipped.attention(kv) is not None], device
    assert MEASURED_KERNELS["a100-80gb"].kv_cache == ("bf16",)


def test_the_shipped_h100_fp8_table_prices_an_fp8_gemm_as_measured():
    """Llama-2-7B in fp8 on H100, 4096 tokens: the O projection is the shipped fp8 (4096, 4096,
    4096) point."""
    with np.load(DATA_DIR / "h100-sxm.npz") as data:
        m, n, k = (list(data[f"gemm_fp8_{axis}"]) for axis in "mnk")
        measured = float(data["gemm_fp8_ms"][m.index(4096), n.index(4096), k.index(4096)]) * MS
    fp8 = MODELS["llama-2-7b"].model_copy(update={"weight_dtype": "fp8"})
    silicon = build_predictor(parse_config({"model": "mine", "models": {"mine": fp8.model_dump()},
                                            "device": "h100-sxm"}))
    assert isinstance(silicon, SiliconPredictor)
    assert silicon.layer_ops(np.array([4096.0]))["attn_post_proj"][0] == pytest.approx(measured, rel=1e-12)


def test_each_residual_add_is_fused_into_the_norm_after_it():
    """vLLM adds the residual inside the RMSNorm (fused_add_rms_norm): per layer two norm kernels,
    each reading the input and the residual and writing both, and no separate add. 16 tokens of
    hidden 1024: 4 x 16 x 1024 values x 2 bytes = 131,072 bytes at H100's 3,350 GB/s x 0.8 =
    2.68e12 B/s is 48.907 ns, plus the 2 us launch of a small kernel."""
    times = predictor().layer_ops(np.array([16.0]))
    expected = 131072 / 2.68e12 + 2e-6
    assert times["input_layernorm"][0] == pytest.approx(expected, rel=1e-12)
    assert times["post_attention_layernorm"][0] == pytest.approx(expected, rel=1e-12)
    assert "add" not in times


def test_the_fused_moe_table_is_read_at_the_experts_uniform_routing_touches():
    """The table's rows route evenly: t tokens read min(2t, 4) of TINY_MOE's 4 experts (top-2).
    Routed uniformly, 2 tokens touch 4 (1 - (1/2)^2) = 3 experts, which the balanced rows read at
    1.5 tokens; the table is 30 us at 1 token and 90 at 64, log-log between: 30 x 1.5^a us with
    a = ln 3 / ln 64. 4 tokens (past the 2 from which the rows read all 4) touch 3.75 experts: the
    row at 4 less the cost of reading 4 instead of 3.75, 30 (4^a - 2^a + 1.875^a) us. One token
    reads 2 either way (30 us), and 64 touch all 4 (90 us, the row itself)."""
    a = math.log(3) / math.log(64)
    times = predictor(TINY_MOE).layer_ops(np.array([1.0, 2.0, 4.0, 64.0]))["mlp_experts"]
    assert times.tolist() == pytest.approx([3e-5, 3e-5 * 1.5 ** a, 3e-5 * (4 ** a - 2 ** a + 1.875 ** a), 9e-5],
                                           rel=1e-12)


def test_more_than_two_gpus_over_pcie_all_reduce_through_nccl_only():
    """vLLM disables its custom all-reduce on more than two PCIe-only GPUs. TP 4, hidden 1024, 4
    tokens = 8 KiB: on H100 (NVLink) the custom table's 6 us; on L40S (PCIe, 32 GB/s) NCCL's
    20 us (its flat 1 KiB..64 MiB log line at 8 KiB: 20 x 25^(log 8 / log 65536) us)."""
    base = tables()
    four = dataclasses.replace(base, allreduce={4: base.allreduce[2]}, nccl={4: base.nccl[2]})
    nccl_at_8k = 2e-5 * (5e-4 / 2e-5) ** (math.log(8) / math.log(65536))

    def all_reduce(device: str) -> float:
        silicon = SiliconPredictor(TINY, "test", DEVICES[device], 4, 1, SiliconPredictorConfig(), four)
        return float(silicon.layer_ops(np.array([4.0]))["tp_all_reduce"][0])

    assert all_reduce("h100-sxm") == pytest.approx(2 * 6e-6, rel=1e-12)
    assert all_reduce("l40s") == pytest.approx(2 * nccl_at_8k, rel=1e-12)
    at_two = SiliconPredictor(TINY, "test", DEVICES["l40s"], 2, 1, SiliconPredictorConfig(), tables())
    assert at_two.layer_ops(np.array([4.0]))["tp_all_reduce"][0] == pytest.approx(2 * 6e-6, rel=1e-12)
