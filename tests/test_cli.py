"""`python -m sim_core`: good runs write their files; bad input is one line and exit code 2."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOOD = """
model: llama-2-7b
device: a100-80gb
max_model_len: 1024
predictor: {type: linear}
scheduler: {type: sarathi, num_blocks: 300, chunk_size: 128}
cluster: {num_replicas: 2, pipeline_parallel_size: 2, global_scheduler: lor}
workload: {trace_file: trace.csv}
"""
TRACE = "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,20\n0.1,50,10\n0.3,300,5\n"


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "sim_core", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=120)


def test_run_writes_every_output_and_prints_the_summary(tmp_path):
    (tmp_path / "s.yaml").write_text(GOOD)
    (tmp_path / "trace.csv").write_text(TRACE)
    done = cli("run", "--config", tmp_path / "s.yaml", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "requests: 3 finished, 0 rejected" in done.stdout
    for name in ("requests.csv", "batches.csv", "summary.json", "chrome_trace.json", "batch_stages.csv"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    operators = (tmp_path / "out" / "operators.csv").read_text().splitlines()
    # the linear cost model has two parts: per-iteration base and per-token time
    assert operators[0] == "operator,seconds,share"
    assert sorted(r.split(",")[0] for r in operators[1:]) == ["base", "tokens"]
    assert "stage time by operator: " in done.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["summary"]
    assert summary["num_finished"] == 3
    header = (tmp_path / "out" / "requests.csv").read_text().splitlines()[0]
    assert header.startswith("request_id,arrived_at,num_prefill_tokens,num_decode_tokens,replica_id,status,"
                             "scheduled_at,prefill_completed_at,completed_at,num_restarts")


def test_same_config_gives_byte_identical_outputs(tmp_path):
    (tmp_path / "s.yaml").write_text(GOOD)
    (tmp_path / "trace.csv").write_text(TRACE)
    for out in ("a", "b"):
        assert cli("run", "--config", tmp_path / "s.yaml", "--out", tmp_path / out).returncode == 0
    for name in ("requests.csv", "batches.csv", "summary.json", "chrome_trace.json", "timeseries.csv", "operators.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_validate_accepts_scenarios_and_traces(tmp_path):
    (tmp_path / "s.yaml").write_text(GOOD)
    (tmp_path / "trace.csv").write_text(TRACE)
    done = cli("validate", tmp_path / "s.yaml", tmp_path / "trace.csv")
    assert done.returncode == 0
    assert "ok: " in done.stdout and "trace of 3 requests" in done.stdout


BAD_CASES = {
    "missing config": ("run --config {d}/nope.yaml", "nope.yaml: file not found"),
    "missing trace": ("run --config {d}/missing_trace.yaml", "gone.csv: file not found"),
    "wrong columns": ("validate {d}/cols.csv", "cannot tell the trace format from its columns; found: t, p, d"),
    "wrong columns, format named": ("validate --format vidur {d}/cols.csv", "missing column(s) arrived_at"),
    "bad Mooncake line": ("validate {d}/bad.jsonl", "bad.jsonl, row 2 (line 2): not valid JSON"),
    "negative tokens": ("validate {d}/neg.csv", "row 2 (line 3), column 'num_decode_tokens': value -1 is negative"),
    "non-integer tokens": ("validate {d}/frac.csv",
                           "row 1 (line 2), column 'num_prefill_tokens': value 1.5 is not a whole"),
    "nan": ("validate {d}/nan.csv", "column 'arrived_at': value 'nan' is not a finite number"),
    "empty trace": ("validate {d}/empty.csv", "file is empty"),
    "unknown scheduler": ("run --config {d}/unknown.yaml", "scheduler.type: got 'fifo'; allowed one of: vllm"),
}


def _bad_files(d: Path):
    (d / "missing_trace.yaml").write_text("predictor: {type: linear}\nworkload: {trace_file: gone.csv}\n")
    (d / "cols.csv").write_text("t,p,d\n0,1,1\n")
    (d / "neg.csv").write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,5\n1,5,-1\n")
    (d / "frac.csv").write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,1.5,5\n")
    (d / "nan.csv").write_text("arrived_at,num_prefill_tokens,num_decode_tokens\nnan,5,5\n")
    (d / "empty.csv").write_text("")
    (d / "bad.jsonl").write_text('{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 1,\n')
    (d / "unknown.yaml").write_text("scheduler: {type: fifo}\n")


def test_bad_input_exits_2_with_one_clear_line_and_no_traceback(tmp_path):
    _bad_files(tmp_path)
    for name, (command, message) in BAD_CASES.items():
        done = cli(*command.format(d=tmp_path).split())
        assert done.returncode == 2, name
        assert message in done.stderr, (name, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, name


def test_a_request_that_can_never_fit_is_reported_rejected(tmp_path):
    (tmp_path / "s.yaml").write_text("predictor: {type: linear}\nscheduler: {num_blocks: 4}\n"
                                     "workload: {trace_file: t.csv}\n")
    (tmp_path / "t.csv").write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,3\n0,500,3\n")
    done = cli("run", "--config", tmp_path / "s.yaml", "--out", tmp_path / "o")
    assert done.returncode == 0
    assert "requests: 1 finished, 1 rejected" in done.stdout
    rows = (tmp_path / "o" / "requests.csv").read_text().splitlines()
    assert "rejected" in rows[2] and "can never be served" in rows[2]


def test_generate_writes_a_trace_that_validates_and_replays(tmp_path):
    (tmp_path / "g.yaml").write_text("seed: 5\nworkload: {num_requests: 40, arrival: {qps: 3}}\n")
    done = cli("generate", "--config", tmp_path / "g.yaml", "--out", tmp_path / "t.csv")
    assert done.returncode == 0 and "wrote 40 requests" in done.stdout
    assert cli("validate", tmp_path / "t.csv").stdout.startswith(
        f"ok: {tmp_path / 't.csv'}: canonical trace of 40 requests")


def test_run_replays_a_mooncake_trace(tmp_path):
    (tmp_path / "s.yaml").write_text("predictor: {type: linear}\nworkload: {trace_file: "
                                     f"{ROOT / 'tests' / 'data' / 'traces' / 'mooncake.jsonl'}}}\n")
    done = cli("run", "--config", tmp_path / "s.yaml")
    assert done.returncode == 0, done.stderr
    assert "requests: 4 finished, 0 rejected" in done.stdout


def test_a_series_scenario_with_out_is_refused_before_the_run(tmp_path, monkeypatch, capsys):
    """`engine.record: series` keeps no batch members, which batches.csv and the Chrome trace
    list: with --out the CLI refuses at once (exit 2, one line naming the level and what to
    record at instead), before simulating and before touching the folder; without --out the
    same scenario runs and prints its summary."""
    import sim_core
    from sim_core.cli.main import main

    (tmp_path / "s.yaml").write_text(GOOD + "engine: {record: series}\n")
    (tmp_path / "trace.csv").write_text(TRACE)

    def no_run(*args, **kwargs):
        raise AssertionError("the run must not start")

    with monkeypatch.context() as patched:
        patched.setattr(sim_core, "run_simulation", no_run)
        assert main(["run", "--config", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert "engine.record 'series'" in error and "record at 'batches' or 'full' to write outputs" in error
    assert not (tmp_path / "out").exists()
    assert main(["run", "--config", str(tmp_path / "s.yaml")]) == 0
    assert "requests: 3 finished, 0 rejected" in capsys.readouterr().out
