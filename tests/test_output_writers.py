"""The output writers that scale (issue 20): CSV tables through Arrow give the very bytes pandas'
`to_csv(index=False)` writes, the Chrome trace's fast encoder the very text of
`json.dumps(chrome_trace(result), separators=(",", ":"))`, a gzip'd trace the same JSON, and
Parquet tables the same tables. The references are the writers these replace (pandas, json.dumps
of the dict form), run on results that hold every column kind: a vllm run, P/D with transfers,
vllm_v0 with swaps and copies, vllm_v1 with KV offload, pipeline stages, sessions, preemptions,
rejected requests (NaN columns, a reason with a comma) and a run with empty batch tables."""

import copy
import gzip
import json

import numpy as np
import pandas as pd
import pytest
from conftest import simulate
from test_cli import GOOD, TRACE, cli
from test_kv_offload import _config as offload_config
from test_kv_offload import _workload as offload_workload
from test_vllm_v0 import run as v0_run

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.export import OutputFormats, chrome_trace, read_manifest, write_chrome_trace, write_outputs
from sim_core.export.batch_lists import ListColumn
from sim_core.export.csv_table import csv_pieces
from sim_core.export.float_text import float_texts
from sim_core.export.run_files import REQUEST_COLUMNS, output_files
from sim_core.export.trace_text import chrome_trace_bytes
from sim_core.scenarios.presets import PRESETS

PRESET_NAMES = ("Default: Llama-2-13B on A100-40GB, vLLM", "Preemption storm when KV is tight",
                "Pipeline bubbles at PP=4", "P/D disaggregation removes prefill interference",
                "Agentic sessions, closed loop", "Swap preemption under tight KV (vLLM v0.6, V0 engine)")


def _preset(name: str):
    scenario = copy.deepcopy(next(p.scenario for p in PRESETS if p.name == name))
    scenario.setdefault("engine", {})["record"] = "full"
    return run_simulation(parse_config(scenario))


RUNS = {
    **{name: (lambda name=name: _preset(name)) for name in PRESET_NAMES},
    "vllm_v0 swaps and copies": lambda: v0_run([(0.0, 8, 20), (0.0, 6, 6)], n=[1, 2], num_blocks=8,
                                               preemption_mode="recompute"),
    "vllm_v1 KV offload": lambda: run_simulation(parse_config(offload_config(0.125)), offload_workload()),
    "rejected, NaN columns": lambda: simulate([(0.0, 32, 100), (0.0, 20, 5)], scheduler={"num_blocks": 4}),
    "empty batch tables": lambda: simulate([(0.0, 32, 5), (0.1, 20, 5)], engine={"record": "requests"}),
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def result(request):
    return RUNS[request.param]()


def _pandas_csv(frame: pd.DataFrame) -> bytes:
    """The writer this module replaces: request lists joined by spaces, then pandas."""
    frame = frame.copy()
    for name in ("request_ids", "request_tokens"):
        if name in frame and len(frame):
            frame[name] = [" ".join(map(str, items)) for items in frame[name]]
    return frame.to_csv(index=False).encode("utf-8")


# ---- floats ------------------------------------------------------------------------------------


def test_floats_are_written_as_repr_writes_them_at_every_magnitude():
    """Arrow's cast lays out integral values, values from 1e10 on and tiny ones differently from
    repr; the rewrite gives repr's text for random values of every magnitude, their negatives,
    rounded and integral variants, and the edge cases (zeros, subnormals, powers of ten, 2**53)."""
    rng = np.random.default_rng(0)
    magnitudes = 10.0 ** rng.uniform(-320, 308, 20_000)
    near = 10.0 ** rng.uniform(-6, 18, 60_000)
    values = np.concatenate([magnitudes, near, -near, np.round(near), np.round(near, 3), np.cumsum(near[:5000]),
                             [0.0, -0.0, 5e-324, 1e-4, 1e-5, 1e10, 1e15, 1e16, 2.0 ** 53, 9999999999999998.0,
                              9999999999.999998, 12345678901.5, 0.1 + 0.2, np.nan, np.inf, -np.inf]])
    assert float_texts(values).to_pylist() == [repr(value) for value in values.tolist()]
    repeated = np.repeat(np.concatenate([near[:3000], [0.0, -0.0, 0.0, np.nan]]), 3)   # written once per run
    assert float_texts(repeated).to_pylist() == [repr(value) for value in repeated.tolist()]
    specials = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
    assert float_texts(np.array([np.nan, np.inf, -np.inf, 1.5]), specials).to_pylist() == [
        "NaN", "Infinity", "-Infinity", "1.5"]
    assert float_texts(np.array([np.nan, 2.0]), {"nan": None}).to_pylist() == [None, "2.0"]


# ---- request lists -----------------------------------------------------------------------------


def test_request_lists_are_converted_once_per_tuple_object():
    """Rows holding tuple objects a, b, a, (), b, c (c equal to a but another object): four
    objects are converted (a, b, (), c in order of first appearance); each row still gets its
    own items, text and sum, and per_row lays the items out row by row."""
    a, b, c = (1, 2), (3,), tuple([1, 2])
    column = ListColumn(pd.Series([a, b, a, (), b, c], dtype=object))
    assert column.run_of_row.tolist() == [0, 1, 0, 2, 1, 3]
    assert column.offsets.tolist() == [0, 2, 3, 3, 5] and column.values.tolist() == [1, 2, 3, 1, 2]
    assert column.texts(" ").to_pylist() == ["1 2", "3", "1 2", "", "3", "1 2"]
    assert column.texts(",", np.array([4, 0])).to_pylist() == ["3", "1,2"]
    assert column.sums.tolist() == [3, 3, 3, 0, 3, 3] and column.lengths.tolist() == [2, 1, 2, 0, 1, 2]
    rows, items = column.per_row()
    assert rows.tolist() == [0, 0, 1, 2, 2, 4, 5, 5] and items.tolist() == [1, 2, 3, 1, 2, 3, 1, 2]


def test_above_the_whole_text_limit_only_the_runs_asked_for_are_written(monkeypatch):
    """With the limit at 2 items (the column holds 5) rows 4, 0 and 3 get their own texts from
    the runs they hold (b, a, the empty one), as below the limit."""
    import sim_core.export.batch_lists as batch_lists

    monkeypatch.setattr(batch_lists, "WHOLE_TEXT_ITEMS", 2)
    a, b = (1, 2), (3,)
    column = ListColumn(pd.Series([a, b, a, (), b, tuple([4, 5])], dtype=object))
    assert column.texts(",", np.array([4, 0, 3])).to_pylist() == ["3", "1,2", ""]
    assert column.texts(" ").to_pylist() == ["1 2", "3", "1 2", "", "3", "4 5"]


# ---- CSV ---------------------------------------------------------------------------------------


def test_every_table_of_every_run_is_byte_identical_to_pandas(result):
    """Each CSV the run writes equals pandas' to_csv of the same table (requests in the CSV's
    column order, request lists joined by spaces)."""
    frames = {"requests.csv": result.requests.loc[:, list(REQUEST_COLUMNS)], "batches.csv": result.batches,
              "batch_stages.csv": result.batch_stages, "timeseries.csv": result.timeseries,
              "operators.csv": result.operator_times, "transfers.csv": result.transfers,
              "cache_ops.csv": result.cache_ops, "kv_offload.csv": result.kv_offload}
    written = [name for name in output_files(result) if name.endswith(".csv")]
    assert written[:5] == ["requests.csv", "batches.csv", "batch_stages.csv", "timeseries.csv", "operators.csv"]
    for name in written:
        assert b"".join(output_files(result)[name]()) == _pandas_csv(frames[name]), name


def test_cells_are_quoted_and_left_empty_as_pandas_does():
    """Commas, quotes and line breaks are quoted (quotes doubled); NaN, None and a missing
    category are empty cells; booleans are True/False; infinities inf/-inf; a table of one
    column quotes its empty cells; names are quoted like cells; a float32 column goes to pandas;
    a table without columns is one empty line."""
    frame = pd.DataFrame({
        "plain": ["a", "b,c", 'say "hi"', "two\nlines", "", None],
        "category": pd.Categorical(["x", None, "y", "x", "y", "x"]),
        "flag": [True, False, True, False, True, False],
        "number": [1.5, np.nan, np.inf, -np.inf, 0.0, -0.0],
        "count": np.arange(6, dtype=np.int64) - 2,
        "mixed, name": pd.Series(["p", 3, 4.5, None, "q", "r"], dtype=object)})
    assert b"".join(csv_pieces(frame)) == frame.to_csv(index=False).encode()
    assert b"".join(csv_pieces(frame.iloc[:0])) == frame.iloc[:0].to_csv(index=False).encode()
    single = pd.DataFrame({"reason": ["", None, "x"]})
    assert b"".join(csv_pieces(single)) == single.to_csv(index=False).encode() == b'reason\n""\n""\nx\n'
    narrow = pd.DataFrame({"a": np.array([0.1, 2.0], dtype=np.float32), "b": [1, 2]})
    assert b"".join(csv_pieces(narrow)) == narrow.to_csv(index=False).encode() == b"a,b\n0.1,1\n2.0,2\n"
    assert b"".join(csv_pieces(pd.DataFrame())) == b"\n"


def test_large_tables_are_written_in_chunks_with_the_same_bytes(monkeypatch):
    """Rows are laid out in chunks (here 3 rows) that join to pandas' text."""
    import sim_core.export.csv_table as csv_table

    monkeypatch.setattr(csv_table, "CHUNK_ROWS", 3)
    frame = pd.DataFrame({"time": np.arange(10) / 7, "reason": ["a,b" if i == 4 else "" for i in range(10)]})
    pieces = list(csv_table.csv_pieces(frame))
    assert len(pieces) == 1 + 4 and b"".join(pieces) == frame.to_csv(index=False).encode()


# ---- the Chrome trace --------------------------------------------------------------------------


def test_the_fast_trace_is_the_json_of_the_dict_form(result):
    """Byte for byte the text json.dumps writes of chrome_trace(result)."""
    assert chrome_trace_bytes(result) == json.dumps(chrome_trace(result), separators=(",", ":")).encode()


def test_the_trace_is_streamed_in_chunks_with_the_same_text(monkeypatch):
    """With chunks of 7 rows the preemption preset's trace (a few hundred rows per table) comes
    in many pieces that join to the same text."""
    import sim_core.export.request_track_text as request_track_text
    import sim_core.export.trace_text as trace_text

    run = _preset("Preemption storm when KV is tight")
    whole = chrome_trace_bytes(run)
    monkeypatch.setattr(trace_text, "CHUNK_ROWS", 7)
    monkeypatch.setattr(request_track_text, "CHUNK_ROWS", 7)
    pieces = list(trace_text.chrome_trace_pieces(run))
    assert len(pieces) > 100 and b"".join(pieces) == whole


# ---- formats -----------------------------------------------------------------------------------


def test_a_gzipped_trace_holds_the_same_json_and_a_rerun_as_json_removes_it(tmp_path):
    """`json.gz`: chrome_trace.json.gz (gzip) unpacks to the JSON file's bytes; the manifest
    lists it; the next run writing JSON removes it; write_chrome_trace(gzip=True) writes it alone."""
    run = _preset("Pipeline bubbles at PP=4")
    paths = write_outputs(run, tmp_path / "gz", formats=OutputFormats(trace="json.gz"))
    packed = (tmp_path / "gz" / "chrome_trace.json.gz").read_bytes()
    assert packed[:2] == b"\x1f\x8b" and gzip.decompress(packed) == chrome_trace_bytes(run)
    assert chrome_trace_bytes(run, gzip=True) == packed          # the app's download: the same bytes
    assert tmp_path / "gz" / "chrome_trace.json.gz" in paths and not (tmp_path / "gz" / "chrome_trace.json").exists()
    assert read_manifest(tmp_path / "gz")["files"]["chrome_trace.json.gz"]["bytes"] == len(packed)
    write_outputs(run, tmp_path / "gz")
    assert (tmp_path / "gz" / "chrome_trace.json").is_file() and not (tmp_path / "gz" / "chrome_trace.json.gz").exists()
    write_chrome_trace(run, tmp_path / "alone.json.gz", gzip=True)
    plain = (tmp_path / "gz" / "chrome_trace.json").read_bytes()
    assert gzip.decompress((tmp_path / "alone.json.gz").read_bytes()) == plain


def test_parquet_tables_read_back_equal_to_the_csv_tables(tmp_path):
    """Every table of a P/D run (transfers included) written as Parquet reads back with pandas
    equal to the same table read from its CSV, request lists as lists; the manifest lists the
    .parquet files, and a rerun as CSV removes them."""
    run = _preset("P/D disaggregation removes prefill interference")
    write_outputs(run, tmp_path / "csv")
    write_outputs(run, tmp_path / "pq", formats=OutputFormats(tables="parquet"))
    tables = ["requests", "batches", "batch_stages", "timeseries", "operators", "transfers"]
    assert sorted(read_manifest(tmp_path / "pq")["files"]) == sorted(
        [f"{name}.parquet" for name in tables] + ["summary.json", "chrome_trace.json"])
    for name in tables:
        back = pd.read_parquet(tmp_path / "pq" / f"{name}.parquet")
        texts = [column for column in back.columns if back[column].dtype.kind not in "biuf"]
        text = pd.read_csv(tmp_path / "csv" / f"{name}.csv", dtype=dict.fromkeys(texts, str), keep_default_na=False,
                           na_values={column: [""] for column in back.columns if column not in texts})
        for column in ("request_ids", "request_tokens"):
            if column in back:
                assert [tuple(items) for items in back[column]] == run.batches[column].tolist()
                back[column] = [" ".join(map(str, items)) for items in back[column]]
                text[column] = text[column].astype(str)
        pd.testing.assert_frame_equal(_texts_filled(back), _texts_filled(text), check_dtype=False, obj=name)
    write_outputs(run, tmp_path / "pq")
    assert not list((tmp_path / "pq").glob("*.parquet"))


def _texts_filled(frame: pd.DataFrame) -> pd.DataFrame:
    """Text columns as objects with "" for missing (the CSV cannot tell an empty string from none)."""
    return frame.apply(lambda column: column if column.dtype.kind in "biuf"
                       else column.astype(object).where(column.notna(), ""))


def test_an_unknown_format_is_a_one_line_error():
    with pytest.raises(ConfigError, match="table format 'xlsx': choose one of csv, parquet"):
        OutputFormats(tables="xlsx")  # type: ignore[arg-type]


def test_the_run_command_writes_parquet_tables_and_a_gzipped_trace(tmp_path):
    """`run --tables parquet --chrome-trace json.gz` writes those files, and says so."""
    (tmp_path / "s.yaml").write_text(GOOD)
    (tmp_path / "trace.csv").write_text(TRACE)
    out = tmp_path / "out"
    done = cli("run", "--config", tmp_path / "s.yaml", "--out", out, "--tables", "parquet", "--chrome-trace", "json.gz")
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in out.iterdir()) == [
        "batch_stages.parquet", "batches.parquet", "chrome_trace.json.gz", "manifest.json", "operators.parquet",
        "requests.parquet", "summary.json", "timeseries.parquet"]
    assert f"wrote {out / 'requests.parquet'} and the other outputs" in done.stdout
    assert len(pd.read_parquet(out / "requests.parquet")) == 3
    assert json.loads(gzip.decompress((out / "chrome_trace.json.gz").read_bytes()))["displayTimeUnit"] == "ms"
