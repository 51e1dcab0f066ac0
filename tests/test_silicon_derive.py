"""Deriving the silicon tables from a perf_db folder: the fill rule for unmeasured points, the
deterministic file, and `predictor silicon-report` on a small perf_db the test writes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sim_core.cli.main import main
from sim_core.predictor.silicon_derive import Measured, derive_arrays, fill, monotone, pick_version, write_npz
from sim_core.predictor.silicon_tables import tables_from_arrays

AXIS = np.array([1, 2, 4])


@pytest.mark.parametrize("values,expected", [
    ([1.0, np.nan, 4.0], [1.0, 2.0, 4.0]),    # between: the geometric mean of the neighbours
    ([1.0, 2.0, np.nan], [1.0, 2.0, 4.0]),    # above: the last log-log slope (1)
    ([1.0, 4.0, np.nan], [1.0, 4.0, 8.0]),    # above: slope 2 is clamped to the axis's power 1
    ([np.nan, 2.0, 4.0], [2.0, 2.0, 4.0]),    # below: flat
])
def test_a_missing_point_is_filled_from_its_measured_neighbours(values, expected):
    filled = fill(Measured((AXIS,), np.array(values), (1.0,), (0,)))
    assert filled.tolist() == pytest.approx(expected, rel=1e-12)


def test_a_bracketed_point_is_interpolated_along_the_axis_that_brackets_it():
    """(1, 1) has no measured point before it in its column (axis 0, tried first), which would
    give it the flat 9 from (2, 1); its row brackets it: sqrt(1 x 4) = 2. (0, 1) likewise: 9."""
    grid = np.array([[9.0, np.nan, 9.0], [1.0, np.nan, 4.0], [9.0, 9.0, 9.0]])
    filled = fill(Measured((AXIS, AXIS), grid, (1.0, 1.0), (0, 1)))
    assert filled[1, 1] == pytest.approx(2.0, rel=1e-12)
    assert filled[0, 1] == pytest.approx(9.0, rel=1e-12)


def test_a_point_slower_than_a_larger_one_is_capped_at_it():
    """1-D: 3 ms at size 2 above 2 ms at size 4 becomes 2; unmeasured stays unmeasured. 2-D: the
    (small m, large k) point, 9, is capped by (large m, large k), 3; (small, small) keeps its 1."""
    capped = monotone(np.array([np.nan, 1.0, 3.0, 2.0]))
    assert np.isnan(capped[0]) and capped[1:].tolist() == [1.0, 2.0, 2.0]
    assert monotone(np.array([[1.0, 9.0], [2.0, 3.0]])).tolist() == [[1.0, 3.0], [2.0, 3.0]]


def write_perf_db(root):
    """One system with a GEMM table: 0.05 ms x n / 1024 whatever m and k, 5 x 3 x 2 points, in
    versions 0.14.0 and 0.19.0 (0.14.0 is kept)."""
    rows = [{"gemm_dtype": "bfloat16", "m": m, "n": n, "k": k, "latency": 0.05 * n / 1024}
            for m in (1, 2, 4, 8, 16) for n in (1024, 2048, 4096) for k in (1024, 4096)]
    for version in ("0.14.0", "0.19.0"):
        folder = root / "h100_sxm" / "gemm" / "vllm" / version
        folder.mkdir(parents=True)
        pd.DataFrame(rows).to_parquet(folder / "gemm_perf.parquet")
    return root


def test_the_version_near_0_15_is_kept_and_recorded(tmp_path):
    perf_db = write_perf_db(tmp_path)
    assert pick_version(perf_db / "h100_sxm" / "gemm" / "vllm", "gemm_perf.parquet", "0.14.0") == "0.14.0"
    assert pick_version(perf_db / "h100_sxm" / "gemm" / "vllm", "gemm_perf.parquet", "0.13.0") == "0.14.0"
    arrays = derive_arrays(perf_db, "h100_sxm")
    assert json.loads(str(arrays["meta"]))["versions"]["gemm"] == "0.14.0"


def test_the_shipped_file_is_byte_identical_when_rewritten_and_loads_as_measured(tmp_path):
    """Two writes give the same bytes; the loaded grid prices (m 2, n 2048, k 1024) at 0.1 ms."""
    arrays = derive_arrays(write_perf_db(tmp_path / "db"), "h100_sxm")
    write_npz(tmp_path / "a.npz", arrays)
    write_npz(tmp_path / "b.npz", arrays)
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    with np.load(tmp_path / "a.npz") as data:
        tables = tables_from_arrays("h100-sxm", {key: data[key] for key in data.files})
    assert tables.gemm["bf16"].at(2, 2048, 1024) == pytest.approx(1e-4, rel=1e-7)   # float32 storage


def test_silicon_report_prints_held_out_errors_per_family(tmp_path, capsys):
    """A table flat in m and k: every held-out point (20% of 30 = 6) is priced exactly."""
    perf_db = write_perf_db(tmp_path)
    assert main(["predictor", "silicon-report", "--perf-db", str(perf_db), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == {"h100-sxm": {"gemm": {"median_pct": pytest.approx(0.0, abs=1e-9),
                                            "p90_pct": pytest.approx(0.0, abs=1e-9), "points": 6}}}


def test_silicon_report_on_a_folder_without_systems_is_one_line(tmp_path, capsys):
    assert main(["predictor", "silicon-report", "--perf-db", str(tmp_path)]) == 2
    assert "no system folder" in capsys.readouterr().err


def test_fp8_gemms_come_from_the_newest_version_and_bf16_from_the_one_near_0_15(tmp_path):
    """bf16 rows in 0.14.0 and 0.24.0, fp8 rows in both: the bf16 grid is 0.14.0's (0.05 ms), the
    fp8 grid 0.24.0's (0.03 ms; vLLM's current FP8 kernel), and the file records both versions."""
    grid = [(m, n, k) for m in (1, 16) for n in (1024, 2048) for k in (1024, 4096)]
    for version, fp8_ms in (("0.14.0", 0.09), ("0.24.0", 0.03)):
        rows = [{"gemm_dtype": dtype, "m": m, "n": n, "k": k, "latency": latency} for m, n, k in grid
                for dtype, latency in (("bfloat16", 0.05 if version == "0.14.0" else 0.07), ("fp8", fp8_ms))]
        folder = tmp_path / "h100_sxm" / "gemm" / "vllm" / version
        folder.mkdir(parents=True)
        pd.DataFrame(rows).to_parquet(folder / "gemm_perf.parquet")
    arrays = derive_arrays(tmp_path, "h100_sxm")
    assert arrays["gemm_bf16_ms"].ravel().tolist() == pytest.approx([0.05] * 8)
    assert arrays["gemm_fp8_ms"].ravel().tolist() == pytest.approx([0.03] * 8)
    versions = json.loads(str(arrays["meta"]))["versions"]
    assert (versions["gemm"], versions["gemm_fp8"]) == ("0.14.0", "0.24.0")


def test_attention_over_an_fp8_kv_cache_is_derived_beside_the_bf16_one(tmp_path):
    """Context attention rows with a bf16 cache (0.2 ms) and an fp8 one (0.1 ms), (8, 8, 128) heads:
    `context_ms` holds the first, `context_fp8_ms` the second, and the loaded tables hand the fp8
    ones out for an fp8 cache (none for generation, which has no rows)."""
    rows = [{"batch_size": b, "isl": isl, "num_heads": 8, "num_key_value_heads": 8, "head_dim": 128,
             "attn_dtype": "bfloat16", "kv_cache_dtype": kv, "latency": latency}
            for b in (1, 2) for isl in (16, 256) for kv, latency in (("bfloat16", 0.2), ("fp8", 0.1))]
    folder = tmp_path / "h100_sxm" / "attention" / "vllm" / "0.14.0"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(folder / "context_attention_perf.parquet")
    arrays = derive_arrays(tmp_path, "h100_sxm")
    assert arrays["context_ms"].shape == (1, 2, 2) and arrays["context_ms"].ravel().tolist() == pytest.approx([0.2] * 4)
    assert arrays["context_fp8_ms"].ravel().tolist() == pytest.approx([0.1] * 4)
    tables = tables_from_arrays("h100-sxm", arrays)
    assert tables.context_fp8.grids[(8, 8, 128)].at(2, 256) == pytest.approx(1e-4, rel=1e-7)
    assert tables.attention("fp8") is None   # no generation rows with an fp8 cache
