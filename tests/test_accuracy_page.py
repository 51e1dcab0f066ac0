"""The Accuracy page (AppTest) and its helpers: uploaded files become a run's files by base name or
from a zip read in memory; a replay shows the comparison, the median errors and the CDFs."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pandas as pd
import pytest
from app_helpers import chart_specs, open_app, unescaped
from test_accuracy_readers import bench, log_files

import explorer.accuracy_inputs as inputs
from explorer.accuracy_inputs import read_runs, run_files, zip_files
from explorer.server import run_slots, settings
from sim_core.accuracy.layouts import ReadOptions
from sim_core.errors import ConfigError
from sim_core.viz.accuracy import measured_vs_simulated_cdfs


@pytest.fixture(autouse=True)
def fresh_settings():
    """Each test reads the limits of the environment it sets (settings are per server process)."""
    for cached in (settings, run_slots):
        cached.clear()
    yield
    for cached in (settings, run_slots):
        cached.clear()


def zipped(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_uploaded_files_are_put_back_where_an_inference_perf_run_keeps_them():
    """Browsers drop folders: the lifecycle summaries go back under results/, the rest keep their
    base name; one uploaded JSON names the run after itself."""
    name, files = run_files([("profile.yaml", b"a"), ("exp-config.yaml", b"b"),
                             ("summary_lifecycle_metrics.json", b"c"), ("stage_0_lifecycle_metrics.json", b"d")])
    assert (name, sorted(files)) == ("uploaded run", ["exp-config.yaml", "profile.yaml",
                                                      "results/stage_0_lifecycle_metrics.json",
                                                      "results/summary_lifecycle_metrics.json"])
    assert run_files([("bench-h100.json", b"{}")]) == ("bench-h100", {"bench-h100.json": b"{}"})


def test_a_zip_is_read_in_memory_with_its_common_folder_taken_off():
    """`run1/vllm/meta.json` and `run1/vllm/requests.jsonl` become `meta.json` and
    `requests.jsonl` (the folder both sit in, twice); unreadable suffixes and `..` parts go."""
    data = zipped({"run1/vllm/meta.json": b"m", "run1/vllm/requests.jsonl": b"r", "run1/vllm/plot.png": b"p"})
    assert zip_files("run1.zip", data) == {"meta.json": b"m", "requests.jsonl": b"r"}
    assert zip_files("x.zip", zipped({"../a/profile.yaml": b"p", "b.json": b"j"})) == {
        "a/profile.yaml": b"p", "b.json": b"j"}
    assert run_files([("run1.zip", data)])[0] == "run1"


def test_a_zip_entry_over_the_size_limit_is_refused_before_it_is_inflated(monkeypatch):
    """With a 1 KiB limit, a 2 KiB entry (declared in the header) is refused by name."""
    monkeypatch.setattr(inputs, "MAX_FILE_BYTES", 1024)
    with pytest.raises(ConfigError, match=r"^big\.zip: run/meta\.json: larger than 0 MiB"):
        zip_files("big.zip", zipped({"run/meta.json": b"x" * 2048}))


def test_a_zip_of_a_folder_of_runs_gives_one_run_per_sub_folder():
    """`runs/a/vllm/...` (a request log) and `runs/b/result.json` (a bench result): `runs/` is
    taken off, then each sub-folder is read as its own run, in name order; a folder that is no run
    is skipped, and nothing readable names the layouts expected."""
    entries = {f"runs/a/{name}": data for name, data in log_files(folder="vllm/").items()}
    entries |= {"runs/b/result.json": bench()["result.json"], "runs/c/notes.yaml": b"x: 1"}
    files = zip_files("runs.zip", zipped(entries))
    runs = read_runs("runs", files, ReadOptions(fallback_device="h100-sxm"))
    assert [(run.name, run.layout) for run in runs] == [("a", "request_log"), ("b", "vllm_bench")]
    with pytest.raises(ConfigError, match=r"^runs: not a measured run this tool can read"):
        read_runs("runs", {"c/notes.yaml": b"x: 1", "d/other.yaml": b"y: 2"}, ReadOptions())


@pytest.mark.parametrize("uploads,message", [
    ([], "no files uploaded"),
    ([("a.zip", b""), ("b.json", b"{}")], "a.zip: upload one zip of a run folder on its own"),
    ([("a/meta.json", b"{}"), ("b/meta.json", b"{}")], "meta.json: uploaded twice"),
    ([("broken.zip", b"not a zip")], "broken.zip: not a zip file"),
])
def test_bad_uploads_are_named(uploads, message):
    with pytest.raises(ConfigError) as error:
        run_files(uploads)
    assert str(error.value).startswith(message)


def test_the_cdf_figure_has_a_measured_and_a_simulated_line_per_latency():
    """Measured TTFTs 0.1, 0.3 s (a failed request's NaN left out), simulated 0.2 s and an
    unfinished request left out: four lines, x in ms, ending at a cumulative fraction of 1."""
    measured = pd.DataFrame({"ttft": [0.1, 0.3, np.nan], "e2e": [1.0, 2.0, np.nan]})
    simulated = pd.DataFrame({"ttft": [0.2, 5.0], "e2e": [1.5, 9.0], "status": ["finished", "rejected"]})
    figure = measured_vs_simulated_cdfs(measured, simulated)
    lines = [(trace.name, list(trace.x), list(trace.y)) for trace in figure.data]
    assert lines == [("measured", [100.0, 300.0], [0.5, 1.0]), ("simulated", [200.0], [1.0]),
                     ("measured", [1.0, 2.0], [0.5, 1.0]), ("simulated", [1.5], [1.0])]
    assert figure.layout.xaxis.title.text == "TTFT (ms)" and figure.layout.xaxis2.title.text == "end-to-end (s)"


def upload(app, files: dict[str, bytes]):
    app.file_uploader(key="acc_upload").set_value([(name.split("/")[-1], data, "application/json")
                                                   for name, data in files.items()]).run()


def test_the_page_replays_an_uploaded_request_log_and_shows_the_comparison():
    """requests.jsonl + meta.json (4 requests on an RTX 4090): after Replay the table has the whole
    run's measured TTFT mean (375 ms, see the reader's test), the median errors and the CDFs."""
    app = open_app("pages/accuracy.py")
    assert app.info[0].value == "Upload a measured run, then press Replay."
    upload(app, log_files())
    assert app.info[0].value.startswith("Press Replay")
    app.button(key="acc_replay").click().run()
    assert not app.exception and not app.error
    medians, table = (frame.value for frame in app.dataframe)        # in page order
    row = table[(table["stage"] == "all") & (table["metric"] == "ttft") & (table["stat"] == "mean")]
    assert row["measured_ms"].tolist() == [375.0] and np.isfinite(row["simulated_ms"]).all()
    assert set(medians["figure"]) >= {"e2e mean", "ttft mean", "itl mean"}
    specs = chart_specs(app)
    assert len(specs) == 1 and '"name":"measured"' in specs[0].replace(" ", "")
    app.run()                                          # a rerun keeps the replay of the same files
    assert app.dataframe[1].value.equals(table)


def test_a_bench_result_without_a_gpu_asks_for_one_and_replays_on_the_picked_gpu():
    """A vllm bench JSON names no GPU: the error says so (escaped, no traceback); with H100 picked
    the replay runs on it."""
    app = open_app("pages/accuracy.py")
    upload(app, bench())
    app.button(key="acc_replay").click().run()
    assert not app.exception
    assert unescaped(app.error[0].value) == ("result.json: the result names no GPU; give the one the server ran on "
                                             "(pick it in the GPU box)")
    app.selectbox(key="acc_device").set_value("h100-sxm").run()
    app.button(key="acc_replay").click().run()
    assert not app.exception and not app.error
    assert any(unescaped(c.value).startswith("vllm_bench: llama-2-7b on h100-sxm, TP 1, 3 requests")
               for c in app.main.caption)


def test_a_run_over_the_servers_budget_is_refused_before_it_is_simulated(monkeypatch):
    """With at most 2 requests a run, the 4-request log is refused, naming the limit."""
    monkeypatch.setenv("SIM_EXPLORER_MAX_REQUESTS", "2")
    app = open_app("pages/accuracy.py")
    upload(app, log_files())
    app.button(key="acc_replay").click().run()
    assert not app.exception
    assert "over the limit of 2 requests" in unescaped(app.error[0].value)


def test_a_bad_upload_shows_its_message_without_a_traceback():
    app = open_app("pages/accuracy.py")
    upload(app, {"notes.json": json.dumps({"hello": 1}).encode()})
    app.button(key="acc_replay").click().run()
    assert not app.exception
    assert unescaped(app.error[0].value) == "notes.json: not a vllm bench serve result: missing field 'model_id'"
