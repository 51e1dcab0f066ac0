"""The Ray backend on a real local cluster: the test starts a head on 127.0.0.1 (stopped at the
end, whatever happens), runs a small sweep on it and gets exactly the local backend's results."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_sweep_run import SPEC

from sim_core import ConfigError
from sim_core.sweep import LocalBackend, RayBackend, parse_sweep_spec, run_sweep

RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head():
    """The address of a fresh single-node Ray cluster (2 CPUs, no dashboard), stopped at the end.

    Only this cluster's processes are stopped: `ray start --block` runs in a session of its own
    and with a temp folder of its own, and at the end its session is signalled and any process
    whose command line names that folder is killed (never `ray stop`, which stops every Ray
    process on the machine)."""
    port, folder = _free_port(), tempfile.mkdtemp(prefix="rt", dir="/tmp")   # short: Ray's socket paths
    head = subprocess.Popen([RAY, "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
                             "--num-cpus=2", "--include-dashboard=false", f"--temp-dir={folder}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _wait_for(port, head)
        yield f"127.0.0.1:{port}"
    finally:
        _stop_cluster(head, folder)


def _wait_for(port: int, head: subprocess.Popen, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert head.poll() is None, head.stderr.read().decode()[-2000:]
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                time.sleep(2)                    # the GCS listens before the raylet has registered
                return
        time.sleep(0.5)
    raise AssertionError("the Ray head did not start in time")


def _stop_cluster(head: subprocess.Popen, folder: str) -> None:
    """SIGTERM to the head's session (it stops its daemons), then SIGKILL to whatever of this
    cluster is left: its session, and processes naming its temp folder."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        head.wait(timeout=60)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGKILL)
    subprocess.run(["pkill", "-KILL", "-f", folder], check=False)
    shutil.rmtree(folder, ignore_errors=True)


def test_a_sweep_on_ray_gives_exactly_the_local_results(ray_head, tmp_path):
    spec, base = parse_sweep_spec(SPEC)
    on_ray = run_sweep(spec, base, RayBackend(ray_head), tmp_path / "ray")
    local = run_sweep(spec, base, LocalBackend(workers=2), tmp_path / "local")
    assert on_ray.complete and len(on_ray.records) == 4
    assert on_ray.records == local.records
    assert (tmp_path / "ray" / "results.csv").read_text() == (tmp_path / "local" / "results.csv").read_text()


def test_the_cli_runs_a_sweep_on_ray_and_resumes_it(ray_head, tmp_path):
    import json

    (tmp_path / "sweep.json").write_text(json.dumps(SPEC))
    command = [sys.executable, "-m", "sim_core", "sweep", "--spec", str(tmp_path / "sweep.json"), "--backend", "ray",
               "--address", ray_head, "--out", str(tmp_path / "out")]
    root = Path(__file__).resolve().parents[1]
    first = subprocess.run([*command, "--limit", "2"], cwd=root, capture_output=True, text=True, timeout=300,
                           check=False)
    assert first.returncode == 0, first.stderr
    assert "2 of 4 configuration(s) done: 0 from an earlier run, 2 computed now" in first.stdout
    second = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300, check=False)
    assert "4 of 4 configuration(s) done: 2 from an earlier run, 2 computed now" in second.stdout


def test_an_address_where_nothing_listens_is_a_one_line_error():
    with pytest.raises(ConfigError, match=r"--address: no Ray cluster answers at 127\.0\.0\.1:\d+"):
        list(RayBackend(f"127.0.0.1:{_free_port()}").run(["{}"]))
    with pytest.raises(ConfigError, match="--address: the ray backend needs the address of a running cluster"):
        RayBackend("")


def test_a_background_job_joins_the_cluster_from_its_own_thread(ray_head, tmp_path):
    """As the Capacity page runs it: ray.init happens on the job's thread, not the main one."""
    from sim_core.sweep.job import SweepJob

    spec, base = parse_sweep_spec(SPEC)
    job = SweepJob(spec, base, RayBackend(ray_head), tmp_path).start()
    job.join(300)
    state = job.snapshot()
    assert (state.status, state.done, state.error) == ("finished", 4, None)
