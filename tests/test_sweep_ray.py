"""The Ray backend on a real local cluster: the test starts a head on 127.0.0.1 (stopped at the
end, whatever happens), runs a small sweep on it and gets exactly the local backend's results."""

import shutil
import socket
import subprocess
import sys
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
def ray_head(request):
    """The address of a fresh single-node Ray cluster (2 CPUs, no dashboard)."""
    port = _free_port()
    request.addfinalizer(lambda: subprocess.run([RAY, "stop", "--force"], check=False, capture_output=True, timeout=120))
    started = subprocess.run([RAY, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                              "--num-cpus=2", "--include-dashboard=false"], check=False, capture_output=True, text=True,
                             timeout=180)
    assert started.returncode == 0, started.stderr[-2000:]
    return f"127.0.0.1:{port}"


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
    first = subprocess.run([*command, "--limit", "2"], cwd=root, capture_output=True, text=True, timeout=300, check=False)
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
