"""Compare: the difference table and its winners, labels of what changed, the requests that
differ most, the overlaid figures, and `python -m sim_core compare`."""

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from sim_core import parse_config, run_simulation
from sim_core.results.compare import (
    TIE,
    comparison_table,
    describe_changes,
    difference_frame,
    diverging_requests,
    same_workload,
    winner,
)
from sim_core.viz.compare import (
    cluster_series,
    kv_overlay,
    preemption_overlay,
    queue_overlay,
    synced_timelines,
)

ROOT = Path(__file__).resolve().parents[1]
BASE = {"seed": 3, "max_model_len": 1024, "engine": {"record": "full"},
        "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.0002},
        "scheduler": {"type": "vllm", "num_blocks": 60, "watermark_blocks_fraction": 0.0},
        "workload": {"num_requests": 30, "arrival": {"process": "poisson", "qps": 20.0},
                     "prompt_tokens": {"distribution": "uniform", "min": 64, "max": 256},
                     "output_tokens": {"distribution": "uniform", "min": 16, "max": 96}}}


@pytest.fixture(scope="module")
def runs():
    sarathi = copy.deepcopy(BASE)
    sarathi["scheduler"].update(type="sarathi", chunk_size=128)
    return {"vllm": run_simulation(parse_config(BASE)), "sarathi": run_simulation(parse_config(sarathi))}


def test_winner_takes_direction_ties_and_missing_values_into_account():
    assert winner({"A": 2.0, "B": 1.0}, "lower") == ("B", 50.0)
    assert winner({"A": 3.0, "B": 4.0, "C": 2.0}, "higher") == ("B", pytest.approx(100 / 3))
    assert winner({"A": 1.0, "B": 1.0}, "lower") == (TIE, 0.0)
    assert winner({"A": 0.0, "B": 0.0}, "lower") == (TIE, 0.0)


def test_a_margin_is_relative_to_a_like_the_columns_and_one_below_half_a_percent_is_a_tie():
    """Issue 19 item 10: B 69% below A reads "A by 69%" (not 223% of B); 1,000 against 1,004 would
    show "by 0%", so it is a tie."""
    assert winner({"A": 3.23, "B": 1.0}, "higher") == ("A", pytest.approx(223 / 3.23))
    assert winner({"A": 1000.0, "B": 1004.0}, "higher") == (TIE, pytest.approx(0.4))
    assert winner({"A": 1000.0, "B": 1005.0}, "higher") == ("B", pytest.approx(0.5))
    assert winner({"A": 0.0, "B": 2.0, "C": 4.0}, "lower") == ("A", 100.0)    # A is 0: of the runner-up
    table = pd.DataFrame([{"metric": "throughput", "unit": "req/s", "A": 3.23, "B": 1.0, "winner": "A",
                           "margin_pct": 223 / 3.23},
                          {"metric": "output tokens/s", "unit": "tok/s", "A": 1000.0, "B": 1005.0, "winner": "B",
                           "margin_pct": 0.5}])
    shown = difference_frame(table)
    assert shown["B"].tolist() == ["1 (-69%)", "1,005 (+0%)"]
    assert shown["winner"].tolist() == ["A (by 69%)", "B (by <1%)"]
    assert winner({"A": math.nan, "B": 1.0}, "lower")[0] == ""
    assert winner({"A": 1.0, "B": 2.0}, None)[0] == ""


def test_the_table_holds_each_runs_summary_and_the_winner_per_metric(runs):
    table = comparison_table(runs).set_index("metric")
    for name, run in runs.items():
        assert table.loc["TTFT p90", name] == run.summary["ttft_p90_s"] * 1e3
        assert table.loc["preemptions", name] == run.summary["num_preemptions"]
    faster = min(runs, key=lambda name: runs[name].summary["ttft_p90_s"])
    assert table.loc["TTFT p90", "winner"] == faster
    assert table.loc["GPUs", "winner"] == TIE
    assert table.loc["KV use mean", "winner"] == ""


def test_the_displayed_table_shows_the_difference_to_the_first_run():
    table = pd.DataFrame([{"metric": "TTFT p90", "unit": "ms", "A": 200.0, "B": 150.0, "winner": "B",
                           "margin_pct": 25.0}])
    shown = difference_frame(table)
    assert shown.to_dict("records") == [{"metric": "TTFT p90 (ms)", "A": "200", "B": "150 (-25%)",
                                         "winner": "B (by 25%)"}]


def test_describe_changes_names_the_leaves_that_differ():
    variant = copy.deepcopy(BASE)
    variant["scheduler"]["type"] = "sarathi"
    variant["cluster"] = {"tensor_parallel_size": 2}
    assert describe_changes(BASE, variant) == "tensor_parallel_size=2, type=sarathi"
    assert describe_changes(BASE, BASE) == "unchanged"


def test_describe_changes_leaves_out_the_defaults_a_new_choice_brings():
    """A switch to gamma brings its cv at its default (follows from the process, not listed);
    a cv off its default is a change."""
    base = parse_config(BASE).model_dump(mode="json")
    gamma = parse_config({**BASE, "workload": {**BASE["workload"], "arrival": {"process": "gamma", "qps": 20.0}}})
    assert describe_changes(base, gamma.model_dump(mode="json")) == "process=gamma"
    edited = copy.deepcopy(base)
    edited["workload"]["arrival"].update(process="gamma", cv=3.0)
    assert describe_changes(base, edited) == "cv=3.0, process=gamma"


def test_diverging_requests_puts_partly_finished_then_largest_spreads_first():
    a = pd.DataFrame({"request_id": [0, 1, 2, 3], "ttft": [1.0, 2.0, 3.0, np.nan]})
    b = pd.DataFrame({"request_id": [0, 1, 2, 3], "ttft": [1.5, 2.0, 1.0, 0.5]})
    assert diverging_requests({"a": a, "b": b}, "ttft", limit=3) == [3, 2, 0]


def test_same_workload_gives_every_scenario_the_first_ones_requests():
    first = parse_config(BASE).model_dump(mode="json")
    other = parse_config({**BASE, "seed": 9, "workload": {"num_requests": 5}}).model_dump(mode="json")
    shared = same_workload([first, other])
    assert shared[1]["workload"] == {**first["workload"], "seed": 3} and shared[1]["seed"] == 9


def test_cluster_series_sums_the_last_value_of_each_replica():
    series = pd.DataFrame({"time": [0.0, 1.0, 1.0, 2.0], "replica_id": [0, 1, 1, 0], "num_waiting": [2, 5, 3, 1]})
    times, totals = cluster_series(series, "num_waiting")
    assert times.tolist() == [0.0, 1.0, 2.0] and totals.tolist() == [2.0, 5.0, 4.0]


def test_overlays_draw_one_line_per_run(runs):
    for build in (queue_overlay, kv_overlay, preemption_overlay):
        assert [trace["name"] for trace in json.loads(build(runs).to_json())["data"]] == ["vllm", "sarathi"]
    preemptions = json.loads(preemption_overlay(runs).to_json())["data"]
    for trace, run in zip(preemptions, runs.values()):
        assert _values(trace["y"])[-1] == run.summary["num_preemptions"]


def test_synced_timelines_show_the_same_requests_in_each_panel(runs):
    figure = json.loads(synced_timelines(runs, [4, 0, 7]).to_json())
    assert [a["text"] for a in figure["layout"]["annotations"]] == ["vllm", "sarathi"]
    assert figure["layout"]["yaxis"]["categoryarray"] == ["#7", "#0", "#4"]
    assert figure["layout"]["yaxis2"]["categoryarray"] == ["#7", "#0", "#4"]
    panels = {trace["yaxis"] for trace in figure["data"]}
    assert panels == {"y", "y2"}
    assert sum(trace.get("showlegend", True) for trace in figure["data"] if trace["yaxis"] == "y2") == 0


def _values(data):
    import base64

    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"])).tolist()
    return list(data)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "sim_core", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=False)


def test_cli_compare_prints_the_table_on_the_first_files_workload(tmp_path):
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(BASE))
    other = copy.deepcopy(BASE)
    other["scheduler"]["type"] = "sarathi"
    other["workload"]["num_requests"] = 7
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(other))
    done = cli("compare", tmp_path / "a.yaml", tmp_path / "b.yaml")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["a: the baseline", "b: type=sarathi", "workload: the first file's, for every scenario"]
    assert lines[3].split() == ["metric", "a", "b", "winner"]
    assert any(line.startswith("   TTFT p90 (ms)") or line.lstrip().startswith("TTFT p90 (ms)") for line in lines)
    records = json.loads(cli("compare", tmp_path / "a.yaml", tmp_path / "b.yaml", "--json").stdout)
    assert {r["metric"] for r in records} >= {"throughput", "TTFT p90", "TBT p99", "preemptions"}
    own = json.loads(cli("compare", tmp_path / "a.yaml", tmp_path / "b.yaml", "--own-workloads", "--json").stdout)
    assert own[0]["a"] != own[0]["b"]        # 30 against 7 requests: different throughput


def test_cli_compare_needs_two_to_six_files(tmp_path):
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(BASE))
    done = cli("compare", tmp_path / "a.yaml")
    assert done.returncode == 2 and done.stderr == "error: compare: got 1 scenario file(s); allowed 2 .. 6\n"
