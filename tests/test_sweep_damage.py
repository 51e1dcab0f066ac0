"""Sweeps tolerate damage: bad journal lines are set aside and the resume goes on; a point that
fails (an unreadable trace, a worker killed mid-point) is a row with its error and the sweep goes
on; workers die with their parent; Stop ends a running point; the grid size and the CLI's
options are checked up front; a Ray address that is not a Ray cluster fails fast (loopback only)."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from test_sweep_run import SPEC, InProcess

from sim_core import ConfigError
from sim_core.sweep import LocalBackend, RayBackend, build_grid, parse_sweep_spec, run_sweep
from sim_core.sweep.job import SweepJob
from sim_core.sweep.journal import JOURNAL_NAME
from sim_core.sweep.ray_backend import parse_ray_address
from sim_core.sweep.task import point_task

ROOT = Path(__file__).resolve().parents[1]
# one point whose search takes tens of seconds (20,000 requests per probe, a tight tolerance)
SLOW = {**SPEC, "vary": {}, "search": {"qps_min": 0.5, "qps_max": 256, "num_requests": 20_000, "tolerance": 0.001}}
SECRET = "SECRET-CONTENT-xyz"


def sweep_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "sim_core", "sweep", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout, check=False)


def workers_of(parent: int) -> list[int]:
    """Ids of the sweep workers whose parent is `parent` (from /proc)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"sim_core.sweep.worker" in command:
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Running (a zombie that nobody reaped yet has exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(condition, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    return condition()


def test_bad_journal_lines_are_set_aside_and_the_resume_goes_on(tmp_path):
    """Binary garbage, invalid UTF-8, a JSON list and a dict that is no record (lines 2, 4, 5, 6)
    move to points.jsonl.bad with one note; the two good lines are reused, the rest computed."""
    spec, base = parse_sweep_spec(SPEC)
    run_sweep(spec, base, InProcess(), tmp_path, limit=2)
    journal = tmp_path / JOURNAL_NAME
    good = journal.read_bytes().splitlines(keepends=True)
    bad = [b"\x00\xff\xfe\x80 binary\n", b'{"key": "caf\xe9"}\n', b"[1, 2, 3]\n", b'{"key": "abc", "max_qps": "x"}\n']
    journal.write_bytes(good[0] + bad[0] + good[1] + b"".join(bad[1:]))
    backend = InProcess()
    outcome = run_sweep(spec, base, backend, tmp_path)
    assert outcome.notes == [f"{journal}: 4 unreadable line(s) (line 2, 4, 5, 6) moved to points.jsonl.bad; "
                             "their points are computed again"]
    assert (outcome.num_resumed, backend.computed, outcome.complete) == (2, ["sarathi", "sarathi"], True)
    assert (tmp_path / "points.jsonl.bad").read_bytes() == b"".join(bad)
    assert [json.loads(line)["values"]["scheduler.type"] for line in journal.read_text().splitlines()] == [
        "vllm", "vllm", "sarathi", "sarathi"]
    again = run_sweep(spec, base, InProcess(), tmp_path)
    assert (again.notes, again.num_resumed) == ([], 4)


def test_the_cli_warns_about_a_damaged_journal_and_finishes(tmp_path):
    """The CLI says what it set aside in one warning line and ends with exit 0."""
    (tmp_path / "sweep.json").write_text(json.dumps({**SPEC, "vary": {"scheduler.type": ["vllm"]}}))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / JOURNAL_NAME).write_bytes(b"\xff\xfe garbage\n")
    done = sweep_cli("--spec", tmp_path / "sweep.json", "--out", tmp_path / "out", "--workers", "1")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.replace("\r", "\n").splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {tmp_path / 'out' / JOURNAL_NAME}: 1 unreadable line(s) (line 1) moved to "
                        "points.jsonl.bad; their points are computed again"]
    assert "1 of 1 configuration(s) done: 0 from an earlier run, 1 computed now" in done.stdout


def test_a_job_reports_the_lines_it_set_aside():
    """The Capacity page's job shows the same note in its snapshot."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / JOURNAL_NAME).write_bytes(b"[]\n")
        spec, base = parse_sweep_spec({**SPEC, "vary": {"scheduler.type": ["vllm"]}})
        job = SweepJob(spec, base, InProcess(), folder).start()
        job.join(120)
        state = job.snapshot()
        assert (state.status, state.done) == ("finished", 1)
        assert state.notes == (f"{Path(folder) / JOURNAL_NAME}: 1 unreadable line(s) (line 1) moved to "
                               "points.jsonl.bad; their points are computed again",)


def test_an_unreadable_trace_fails_its_point_only_and_never_shows_the_files_content(tmp_path):
    """Of two points, the one whose trace has a bad cell is a row with an error that names file,
    row and column (not the cell); the other is searched; exit 2 with one line; the journal
    keeps only the good point, so a rerun tries the failed one again."""
    header = "arrived_at,num_prefill_tokens,num_decode_tokens\n"
    (tmp_path / "good.csv").write_text(header + "".join(f"{i / 10},{20 + i},5\n" for i in range(30)))
    (tmp_path / "bad.csv").write_text(header + f"0,10,5\n0.1,{SECRET},5\n")
    base = {**SPEC["base"], "workload": {"trace_file": str(tmp_path / "good.csv")}}
    files = [str(tmp_path / "good.csv"), str(tmp_path / "bad.csv")]
    spec = {**SPEC, "base": base, "vary": {"workload.trace_file": files}}
    (tmp_path / "sweep.json").write_text(json.dumps(spec))
    done = sweep_cli("--spec", tmp_path / "sweep.json", "--out", tmp_path / "out", "--workers", "2")
    error = (f"trace error: {tmp_path / 'bad.csv'}, row 2, column 'num_prefill_tokens': cannot be read "
             "(run `python -m sim_core validate` on it for the reason)")
    assert done.returncode == 2
    assert done.stderr.replace("\r", "\n").splitlines()[-1] == (
        f"error: 1 of 2 point(s) failed (rows with an error in results.csv; a rerun tries them again); the first, "
        f"trace_file={tmp_path / 'bad.csv'}: {error}")
    table = pd.read_csv(tmp_path / "out" / "results.csv")
    assert table["max_qps"].notna().tolist() == [True, False] and table["max_qps"][0] > 0
    assert table["error"].isna().tolist() == [True, False] and table["error"][1] == error
    assert SECRET not in (tmp_path / "out" / "results.csv").read_text() + done.stdout + done.stderr
    assert len((tmp_path / "out" / JOURNAL_NAME).read_text().splitlines()) == 1
    rerun = sweep_cli("--spec", tmp_path / "sweep.json", "--out", tmp_path / "out", "--workers", "1")
    assert rerun.returncode == 2
    assert "2 of 2 configuration(s) done: 1 from an earlier run, 1 computed now" in rerun.stdout


def test_a_worker_killed_mid_point_fails_that_point_and_a_new_worker_goes_on():
    """SIGKILL of the worker computing the slow point: that point is an error with the exit
    status, and the next point is computed by a fresh worker."""
    slow_spec, slow_base = parse_sweep_spec(SLOW)
    fast_spec, fast_base = parse_sweep_spec({**SPEC, "vary": {}})
    tasks = [point_task(build_grid(slow_spec, slow_base).points[0], slow_spec),
             point_task(build_grid(fast_spec, fast_base).points[0], fast_spec)]
    killed = []

    def kill_the_first_worker():
        pids = wait_for(lambda: workers_of(os.getpid()), 60)
        time.sleep(0.5)
        os.kill(pids[0], signal.SIGKILL)
        killed.append(pids[0])
    killer = threading.Thread(target=kill_the_first_worker)
    killer.start()
    results = dict(LocalBackend(workers=1).run(tasks))
    killer.join()
    assert len(killed) == 1 and sorted(results) == [0, 1]
    assert json.loads(results[0]) == {"max_qps": None, "binding_slo": None, "at_capacity": None, "probes": [],
                                      "error": "its worker process exited (status -9)"}
    assert json.loads(results[1])["max_qps"] > 0


def test_workers_exit_when_their_parent_is_killed(tmp_path):
    """The CLI (only it) gets SIGKILL while both workers compute long points: they are gone
    within a few seconds, though their points would take tens of seconds more."""
    (tmp_path / "sweep.json").write_text(json.dumps({**SLOW, "vary": {"scheduler.type": ["vllm", "sarathi"]}}))
    cli = subprocess.Popen([sys.executable, "-m", "sim_core", "sweep", "--spec", str(tmp_path / "sweep.json"), "--out",
                            str(tmp_path / "out"), "--workers", "2"], cwd=ROOT, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    workers = []
    try:
        workers = wait_for(lambda: (found := workers_of(cli.pid)) and len(found) == 2 and found, 60)
        assert workers, "the sweep must have started its two workers"
        time.sleep(1.0)                                  # both are inside their points now
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait(30)
        assert wait_for(lambda: not any(map(alive, workers)), 5), "workers outlived their parent"
    finally:
        for pid in [cli.pid, *workers]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        cli.wait(30)


def test_stop_ends_a_running_point_at_once(tmp_path):
    """Stop during a point of tens of seconds: the job ends within seconds, 'stopped', and its
    worker is gone."""
    spec, base = parse_sweep_spec(SLOW)
    job = SweepJob(spec, base, LocalBackend(workers=1), tmp_path).start()
    workers = wait_for(lambda: workers_of(os.getpid()), 60)
    assert workers
    time.sleep(0.5)
    job.stop()
    job.join(10)
    state = job.snapshot()
    assert (state.status, state.done, state.error) == ("stopped", 0, None)
    assert not any(map(alive, workers))


def test_a_grid_too_large_is_refused_before_any_point_is_built():
    """101 x 100 = 10,100 points: one line naming each key's count, the product and the limit."""
    with pytest.raises(ConfigError) as raised:
        parse_sweep_spec({**SPEC, "vary": {"cluster.num_replicas": list(range(1, 102)), "seed": list(range(100))}},
                         source="s.yaml")
    assert str(raised.value) == ("s.yaml: vary: the grid has 10,100 points (cluster.num_replicas 101 x seed 100); "
                                 "allowed at most 10,000 (split the sweep or vary fewer values)")


def test_a_point_limit_below_one_is_refused():
    spec, base = parse_sweep_spec(SPEC)
    with pytest.raises(ConfigError, match=r"^limit: got 0; allowed 1 \.\. any number of points"):
        run_sweep(spec, base, InProcess(), None, limit=0)


LIMIT_RANGE = "allowed 1 .. any number (new points to compute; leave it out for every point)"


@pytest.mark.parametrize(("option", "line"), [
    (["--limit", "-1"], f"--limit: got -1; {LIMIT_RANGE}"),
    (["--limit", "0"], f"--limit: got 0; {LIMIT_RANGE}"),
    (["--target-qps", "nan"], "--target-qps: got nan; allowed a finite rate above 0 req/s"),
    (["--target-qps", "inf"], "--target-qps: got inf; allowed a finite rate above 0 req/s"),
    (["--target-qps", "-5"], "--target-qps: got -5; allowed a finite rate above 0 req/s"),
    (["--workers", "100000"], "--workers: got 100000; allowed 1 .. 256"),
])
def test_bad_sweep_options_are_one_line_and_exit_2(tmp_path, option, line):
    """Refused before the spec is read or anything runs."""
    (tmp_path / "sweep.json").write_text(json.dumps(SPEC))
    done = sweep_cli("--spec", tmp_path / "sweep.json", "--out", tmp_path / "out", *option, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"error: {line}\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:6379", ("127.0.0.1", 6379)), ("ray://head-node:10001", ("head-node", 10001)),
    ("[::1]:6379", ("::1", 6379)), (" ray_head:6379 ", ("ray_head", 6379)),
])
def test_ray_addresses_are_host_and_port(text, expected):
    assert parse_ray_address(text) == expected


@pytest.mark.parametrize("text", ["auto", "http://10.0.0.1:80", "10.0.0.1", "10.0.0.1:0", "10.0.0.1:65536",
                                  ":6379", "host:port", "a b:1", "x" * 300 + ":1"])
def test_anything_else_is_refused_with_the_text_cut_to_200_characters(text):
    with pytest.raises(ConfigError) as raised:
        parse_ray_address(text)
    shown = text if len(text) <= 200 else text[:199] + "…"
    assert str(raised.value) == (f"--address: got '{shown}'; expected HOST:PORT (e.g. 127.0.0.1:6379) or "
                                 "ray://HOST:PORT, the port in 1 .. 65535")


def test_a_port_that_listens_but_is_not_ray_fails_fast():
    """A plain TCP socket that accepts and never answers: refused within the 3 s probe, not
    after ray.init's minutes of retries."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(ConfigError) as raised:
            RayBackend(f"127.0.0.1:{port}")
        assert time.monotonic() - started < 10
    assert str(raised.value) == (f"--address: 127.0.0.1:{port} is not a Ray cluster (no gRPC answer within 3 s); "
                                 "give the address printed by `ray start --head`")


def test_an_http_server_is_not_a_ray_cluster():
    """A server that answers at once, but in HTTP/1.1, is refused as well."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def answer():
            connection, _ = server.accept()
            with connection:
                connection.recv(1024)
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        responder = threading.Thread(target=answer)
        responder.start()
        with pytest.raises(ConfigError, match=rf"^--address: 127\.0\.0\.1:{port} is not a Ray cluster"):
            RayBackend(f"127.0.0.1:{port}")
        responder.join(10)


def test_the_cli_refuses_a_non_ray_port_in_one_line(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        (tmp_path / "sweep.json").write_text(json.dumps(SPEC))
        done = sweep_cli("--spec", tmp_path / "sweep.json", "--out", tmp_path / "out", "--backend", "ray",
                         "--address", f"127.0.0.1:{port}", timeout=60)
    assert (done.returncode, done.stderr) == (2, f"error: --address: 127.0.0.1:{port} is not a Ray cluster (no gRPC "
                                                 "answer within 3 s); give the address printed by `ray start --head`\n")
