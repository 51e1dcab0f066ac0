"""The silicon predictor's fast lookups give exactly what its plain ones give: a two-axis
grid's corners written out, many points at once (`LogGrid.at_each`), remembered decode prices
and host phases. Values by hand on a small grid; bit-for-bit agreement by hypothesis, on that
grid and on the shipped H100 tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.catalog import DEVICES, MODELS, ModelSpec
from sim_core.config.predictor import SiliconPredictorConfig
from sim_core.predictor.silicon import VECTOR_PAIRS, SiliconPredictor
from sim_core.predictor.silicon_tables import AttentionTable, DeviceTables, LogGrid, load_tables

MS = 1e-3
# batch 1, 4, 16 x length 1, 15, 255, 4095 (the generation table's shape), in ms
DECODE = LogGrid([np.array([1, 4, 16]), np.array([1, 15, 255, 4095])],
                 np.array([[0.01, 0.01, 0.02, 0.04], [0.012, 0.012, 0.03, 0.08], [0.02, 0.02, 0.06, 0.2]]) * MS)
TINY = ModelSpec(name="tiny", num_layers=2, num_q_heads=2, num_kv_heads=2, embedding_dim=1024,
                 mlp_hidden_dim=4096, vocab_size=4096)


def tiny_predictor() -> SiliconPredictor:
    """2 query and 2 KV heads of 1024 / 2 = 512 dims: the decode grid above is its generation
    table as measured (no folding, no head_dim scaling); its launch floor is 0.01 ms."""
    gemm = LogGrid([np.array([1, 16]), np.array([128, 65536]), np.array([128, 65536])], np.full((2, 2, 2), 1e-5))
    context = LogGrid([np.array([1, 2]), np.array([1, 4096])], np.array([[0.01, 2.56], [0.02, 5.12]]) * MS, (1.0, 2.0))
    tables = DeviceTables("test", {}, {"bf16": gemm}, AttentionTable({(2, 2, 512): context}),
                          AttentionTable({(2, 2, 512): DECODE}), {}, {}, {})
    return SiliconPredictor(TINY, "test", DEVICES["h100-sxm"], 1, 1, SiliconPredictorConfig(), tables)


def test_points_priced_together_are_each_points_price():
    """Batch 1 at length 1 is a grid point: 0.01 ms, read as stored. Batch 2 at length 15 lies
    halfway in log batch between 1 and 4 on the length-15 column: the geometric mean of 0.01 and
    0.012 ms. Batch 16 at length 8,190 is past the last length (power 1): 0.2 ms x 8190 / 4095 =
    0.4 ms. Batch 0.5 is below the first batch: flat, 0.01 ms at length 1."""
    batch = np.array([1.0, 2.0, 16.0, 0.5])
    length = np.array([1.0, 15.0, 8190.0, 1.0])
    priced = DECODE.at_each(batch, length)
    assert priced[0] == 0.01 * MS
    assert priced[1] == pytest.approx(math.sqrt(0.01 * 0.012) * MS, rel=1e-12)
    assert priced[2] == pytest.approx(0.4 * MS, rel=1e-12)
    assert priced[3] == 0.01 * MS
    assert priced.tolist() == [DECODE.at(b, n) for b, n in zip(batch.tolist(), length.tolist())]


def test_a_two_axis_point_between_four_corners_weighs_them_in_log_space():
    """Batch 2, length sqrt(15 x 255) (halfway in log on both axes): the log-mean of the four
    corners 0.012 / 0.03 (batch 4) and 0.01 / 0.02 (batch 1): e^(mean of their logs)."""
    length = math.sqrt(15 * 255)
    corners = [0.01, 0.02, 0.012, 0.03]
    expected = math.exp(sum(math.log(c * MS) for c in corners) / 4)
    assert DECODE.at(2.0, length) == pytest.approx(expected, rel=1e-12)
    assert DECODE.at(2.0, length) == DECODE._at_nd((2.0, length))


coordinate = st.one_of(st.sampled_from([0.5, 1.0, 4.0, 15.0, 16.0, 255.0, 4095.0, 5000.0]),
                       st.floats(0.25, 20_000.0, allow_nan=False, allow_infinity=False),
                       st.integers(0, 20_000).map(float))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(coordinate, coordinate), min_size=1, max_size=40))
def test_every_fast_path_equals_the_plain_lookup_bit_for_bit(points):
    """`at` (its two-axis corners written out), `_at_nd` (the generic rule) and `at_each` (all
    points at once) agree to the last bit, on and off grid points, below and beyond the axes."""
    batch = np.array([b for b, _ in points])
    length = np.array([n for _, n in points])
    plain = [DECODE._at_nd((b, n)) for b, n in points]
    assert [DECODE.at(b, n) for b, n in points] == plain
    assert DECODE.at_each(batch, length).tolist() == plain


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 1024), st.integers(1, 20_000_000)), min_size=1, max_size=600))
def test_decode_prices_of_the_shipped_tables_are_the_scalar_ones(pairs):
    """The shipped H100 generation tables, a Llama-2-7B head layout: decode_attention of a run's
    (decodes, context) pairs, whether looked up one by one (fewer than VECTOR_PAIRS) or at once,
    equals decode_scalar of each, remembered or not."""
    predictor = SiliconPredictor(MODELS["llama-2-7b"], "h100-sxm", DEVICES["h100-sxm"], 1, 1,
                                 SiliconPredictorConfig(), load_tables("h100-sxm"))
    counts = np.array([n for n, _ in pairs], dtype=np.float64)
    context = np.array([c for _, c in pairs], dtype=np.float64)
    fresh = SiliconPredictor(MODELS["llama-2-7b"], "h100-sxm", DEVICES["h100-sxm"], 1, 1,
                             SiliconPredictorConfig(), load_tables("h100-sxm"))
    expected = [fresh.decode_scalar(n, c) for n, c in pairs]
    assert predictor.decode_attention(counts, context).tolist() == expected
    many = np.resize(counts, VECTOR_PAIRS + len(pairs)), np.resize(context, VECTOR_PAIRS + len(pairs))
    assert predictor.decode_attention(*many).tolist() == np.resize(np.array(expected), len(many[0])).tolist()


def test_a_decode_price_is_remembered_and_an_int_pair_shares_the_float_pairs_entry():
    """4 decodes over 1,020 cached tokens (mean 255, batch 4 on the table): 0.03 ms less the
    0.01 ms launch floor = 0.02 ms; asked again, or as floats (a run's arrays), the same entry."""
    predictor = tiny_predictor()
    assert predictor.decode_scalar(4, 1020) == pytest.approx(0.02 * MS, rel=1e-12)
    assert list(predictor._decode_cache) == [(4, 1020)]
    assert predictor.decode_scalar(4.0, 1020.0) == predictor.decode_scalar(4, 1020)   # type: ignore[arg-type]
    assert len(predictor._decode_cache) == 1
    assert predictor.decode_scalar(0, 0) == 0.0   # no decodes, no attention


def test_host_phases_of_a_step_size_are_remembered_and_each_caller_gets_its_own():
    """cpu_times(4): the roofline's knobs, 0.5 ms + 5 us x 4 to schedule; the dict handed out
    is a copy, so a caller changing it changes nothing remembered."""
    predictor = tiny_predictor()
    times = predictor.cpu_times(4)
    assert times == predictor.roofline.cpu_times(4)
    assert times["cpu_schedule"] == pytest.approx(0.0005 + 4 * 0.000005, rel=1e-12)
    times["cpu_schedule"] = 1.0
    assert predictor.cpu_times(4) == predictor.roofline.cpu_times(4)
    arrays = predictor.cpu_times(np.array([4, 8]))   # type: ignore[arg-type]
    assert arrays["cpu_schedule"].tolist() == [predictor.cpu_times(4)["cpu_schedule"],
                                               predictor.cpu_times(8)["cpu_schedule"]]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 4096), min_size=1, max_size=40))
def test_host_phases_of_a_runs_iterations_are_the_roofline_sums_bit_for_bit(counts):
    """A run's iteration sizes as an array: every phase equals the roofline's own sum (its
    knobs, read once here) element for element."""
    predictor = tiny_predictor()
    sizes = np.array(counts, dtype=np.int64)
    mine, roofline = predictor.cpu_times(sizes), predictor.roofline.cpu_times(sizes)   # type: ignore[arg-type]
    assert list(mine) == list(roofline)
    assert all(mine[name].tolist() == roofline[name].tolist() for name in roofline)
