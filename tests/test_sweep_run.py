"""Running sweeps: the process pool gives what the search gives in-process, results.csv has the
promised columns, and an interrupted sweep (point limit, or killed) resumes without recomputing
what it finished."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from sim_core.sweep import (
    LocalBackend,
    build_grid,
    capacity_search,
    parse_sweep_spec,
    run_sweep,
)
from sim_core.sweep.journal import JOURNAL_NAME
from sim_core.sweep.task import run_task

ROOT = Path(__file__).resolve().parents[1]
SPEC = {
    "base": {"model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 1024,
             "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.0002},
             "scheduler": {"num_blocks": 400},
             "workload": {"arrival": {"process": "poisson", "qps": 1.0},
                          "prompt_tokens": {"distribution": "uniform", "min": 32, "max": 256},
                          "output_tokens": {"distribution": "uniform", "min": 8, "max": 64}}},
    "vary": {"scheduler.type": ["vllm", "sarathi"], "cluster.num_replicas": [1, 2]},
    "slo": {"ttft_p90_s": 0.5, "tbt_p99_s": 0.1},
    "search": {"qps_min": 0.5, "qps_max": 256, "num_requests": 60, "tolerance": 0.1},
    "gpu_hour_usd": {"a100-80gb": 3.0},
}


class InProcess:
    """A backend that runs tasks here, in order, and remembers which it was given."""

    name = "in-process"

    def __init__(self):
        self.computed: list[str] = []

    def run(self, tasks):
        for index, task in enumerate(tasks):
            self.computed.append(json.loads(task)["scenario"]["scheduler"]["type"])
            yield index, run_task(task)


def test_the_process_pool_finds_what_the_search_finds_in_process(tmp_path):
    spec, base = parse_sweep_spec(SPEC)
    outcome = run_sweep(spec, base, LocalBackend(workers=2), tmp_path)
    for point, record in zip(build_grid(spec, base).points, outcome.records):
        direct = capacity_search(point.scenario, spec.slo, spec.search)
        assert record["key"] == point.key
        assert record["max_qps"] == direct.max_qps > 0
        assert record["probes"] == [p.to_json() for p in direct.probes]
    assert outcome.complete and (outcome.num_resumed, outcome.num_computed) == (0, 4)


def test_results_csv_has_a_row_per_configuration_with_cost_columns(tmp_path):
    spec, base = parse_sweep_spec(SPEC)
    outcome = run_sweep(spec, base, InProcess(), tmp_path)
    table = pd.read_csv(tmp_path / "results.csv")
    assert list(table.columns[:9]) == ["scheduler.type", "cluster.num_replicas", "max_qps", "num_gpus",
                                       "cost_per_hour_usd", "qps_per_usd", "binding_slo", "qps_per_gpu", "device"]
    assert table["scheduler.type"].tolist() == ["vllm", "vllm", "sarathi", "sarathi"]
    assert table["num_gpus"].tolist() == [1, 2, 1, 2]
    assert table["cost_per_hour_usd"].tolist() == [3.0, 6.0, 3.0, 6.0]
    assert table["max_qps"].tolist() == [r["max_qps"] for r in outcome.records]
    assert table["qps_per_usd"].tolist() == pytest.approx((table["max_qps"] / table["cost_per_hour_usd"]).tolist())
    assert set(table["binding_slo"]) <= {"ttft_p90_s", "tbt_p99_s", "overloaded"}


def test_a_point_limit_stops_and_the_rerun_computes_only_the_rest(tmp_path):
    spec, base = parse_sweep_spec(SPEC)
    first = InProcess()
    partial = run_sweep(spec, base, first, tmp_path, limit=3)
    assert (len(partial.records), partial.complete, first.computed) == (3, False, ["vllm", "vllm", "sarathi"])
    assert len(pd.read_csv(tmp_path / "results.csv")) == 3
    second = InProcess()
    finished = run_sweep(spec, base, second, tmp_path)
    assert second.computed == ["sarathi"]
    assert (finished.num_resumed, finished.num_computed, finished.complete) == (3, 1, True)
    assert finished.records == run_sweep(spec, base, InProcess(), tmp_path / "fresh").records
    third = InProcess()
    run_sweep(spec, base, third, tmp_path)
    assert third.computed == []


def test_a_line_cut_by_a_kill_is_recomputed_and_the_journal_stays_readable(tmp_path):
    spec, base = parse_sweep_spec(SPEC)
    run_sweep(spec, base, InProcess(), tmp_path, limit=2)
    journal = tmp_path / JOURNAL_NAME
    text = journal.read_text()
    journal.write_text(text[: len(text) - 40])        # the second line lost its end, as in a kill mid-write
    rerun = InProcess()
    outcome = run_sweep(spec, base, rerun, tmp_path)
    assert rerun.computed == ["vllm", "sarathi", "sarathi"] and outcome.complete
    lines = [json.loads(line) for line in journal.read_text().splitlines()[2:]]
    assert len(lines) == 3 and [r["values"]["scheduler.type"] for r in lines] == ["vllm", "sarathi", "sarathi"]


def test_a_sweep_killed_mid_way_resumes_from_its_journal(tmp_path):
    """The CLI is killed (SIGKILL, workers included) after its first finished points; the rerun
    reports them as done earlier, computes only the rest and ends with the full, correct table."""
    spec_data = {**SPEC, "vary": {"scheduler.type": ["vllm", "sarathi"], "cluster.num_replicas": list(range(1, 25))}}
    (tmp_path / "sweep.json").write_text(json.dumps(spec_data))
    command = [sys.executable, "-m", "sim_core", "sweep", "--spec", str(tmp_path / "sweep.json"),
               "--out", str(tmp_path / "out"), "--workers", "1"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    journal = tmp_path / "out" / JOURNAL_NAME
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not journal.is_file() or journal.read_text().count("\n") < 2):
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)
    finished_before = journal.read_text().count("\n")
    assert 2 <= finished_before < 48, "the sweep must be killed mid-way"
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    resumed = int(done.stdout.split(" configuration(s) done: ")[1].split(" from an earlier run")[0])
    assert resumed >= finished_before
    assert f"{48 - resumed} computed now" in done.stdout
    table = pd.read_csv(tmp_path / "out" / "results.csv")
    spec, base = parse_sweep_spec(spec_data)
    expected = run_sweep(spec, base, InProcess()).records
    assert table["max_qps"].tolist() == [r["max_qps"] for r in expected]


def test_a_bug_in_a_worker_stops_the_sweep_with_one_line():
    with pytest.raises(RuntimeError, match="in a sweep worker: KeyError: 'scenario'"):
        list(LocalBackend(workers=1).run(["{}"]))


def test_a_point_found_by_an_earlier_sweep_of_other_keys_is_reused_with_this_sweeps_labels(tmp_path):
    """The first sweep varies the scheduler; the second varies replicas around vllm: its
    1-replica point is the first sweep's vllm point, reused, with a value in its own column."""
    first, base = parse_sweep_spec({**SPEC, "vary": {"scheduler.type": ["vllm", "sarathi"]}})
    run_sweep(first, base, InProcess(), tmp_path)
    second, base = parse_sweep_spec({**SPEC, "vary": {"cluster.num_replicas": [1, 2]}})
    backend = InProcess()
    outcome = run_sweep(second, base, backend, tmp_path)
    assert (outcome.num_resumed, backend.computed) == (1, ["vllm"])
    table = pd.read_csv(tmp_path / "results.csv")
    assert table["cluster.num_replicas"].tolist() == [1, 2]
