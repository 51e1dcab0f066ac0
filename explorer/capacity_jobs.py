"""Sweeps started from the Capacity page.

A job runs on a background thread owned by a process-wide registry (`st.cache_resource`), not by
the script run that started it, and the page polls it. Only the session that started a job knows
its id, so no session sees another's sweep. Each job keeps a journal in a folder named by the
session inside this server's private sweep folder (journal lines are keyed by point), so starting
a sweep again resumes its finished points; the folder is removed once no kept job uses it. At most
`SIM_EXPLORER_MAX_SWEEP_JOBS` sweeps run at once in a server, and a sweep whose session has gone
is stopped within a few seconds (a watcher thread). Ray is only ever joined
(`ray.init(address=...)`), never started here, and only at addresses whoever started the server
allowed (`SIM_EXPLORER_RAY_ADDRESSES`).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from explorer.server import confine, session_alive, settings
from explorer.state import show_failure
from sim_core import SimCoreError, parse_config
from sim_core.engine.budget import check_budget
from sim_core.errors import ConfigError
from sim_core.sweep import LocalBackend, RayBackend, parse_sweep_spec
from sim_core.sweep.job import SweepJob
from sim_core.sweep.probe import num_probe_requests, probe_scenario
from sim_core.workload import build_workload

JOB_KEY, SESSION_KEY, ERROR_KEY = "capacity_job", "capacity_session", "capacity_error"
MAX_JOBS = 16
WATCH_S = 5.0


@dataclass
class _Entry:
    job: SweepJob
    folder: Path
    alive: Callable[[], bool]


@st.cache_resource
def _jobs() -> tuple[OrderedDict, threading.Lock]:
    jobs, lock = OrderedDict(), threading.Lock()
    threading.Thread(target=_watch, args=(jobs, lock), name="sweep-watcher", daemon=True).start()
    return jobs, lock


def _watch(jobs: OrderedDict, lock: threading.Lock) -> None:
    """Every few seconds, stop the sweeps whose session has gone."""
    while True:
        time.sleep(WATCH_S)
        with lock:
            _stop_orphans(jobs)


@st.cache_resource
def _sweep_root() -> Path:
    """This server's private folder of sweep journals (0700, an unpredictable name), removed when
    the server exits."""
    root = Path(tempfile.mkdtemp(prefix="llm-explorer-sweeps-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def current_job() -> SweepJob | None:
    """The last job this session started (None if none, or the server restarted)."""
    jobs, lock = _jobs()
    with lock:
        entry = jobs.get(st.session_state.get(JOB_KEY))
    return entry.job if entry else None


def start_job(spec_data: dict, backend: str, address: str = "", workers: int | None = None) -> SweepJob:
    """Validate the spec and start it, stopping this session's previous sweep (raises
    ConfigError naming what is wrong, or when the server runs its most sweeps already)."""
    runner = _backend(spec_data, backend, address, workers)
    spec, base = parse_sweep_spec(spec_data, source="sweep")
    previous = current_job()
    if previous is not None:
        previous.stop()
    jobs, lock = _jobs()
    with lock:
        _stop_orphans(jobs)
        running = sum(entry.job.snapshot().status == "running" for entry in jobs.values())
        if running >= settings().max_sweep_jobs:
            raise ConfigError(f"this server already runs {running} sweep(s), its limit "
                              f"(SIM_EXPLORER_MAX_SWEEP_JOBS); try again when one has finished")
        session = st.session_state.setdefault(SESSION_KEY, uuid.uuid4().hex)
        folder = _sweep_root() / session
        job = SweepJob(spec, base, runner, folder)
        _check_probes(job)
        job.start()
        job_id = uuid.uuid4().hex
        jobs[job_id] = _Entry(job, folder, session_alive())
        while len(jobs) > MAX_JOBS:
            _retire(jobs, next(iter(jobs)))
    st.session_state[JOB_KEY] = job_id
    return job


def _backend(spec_data: dict, backend: str, address: str, workers: int | None):
    """The backend a page may use: local, or Ray at an address the server allows; the spec's
    base must be an inline scenario naming only files the web may name."""
    base = spec_data.get("base")
    if not isinstance(base, dict):
        raise ConfigError("sweep: base: from the app, the base must be the current scenario, not a file")
    confine(base, "sweep base")
    if backend != "ray":
        return LocalBackend(workers or settings().sweep_workers)
    if address not in settings().ray_addresses:
        raise ConfigError("Ray cluster: not one this server may join (whoever starts the server lists them in "
                          "SIM_EXPLORER_RAY_ADDRESSES)")
    return RayBackend(address)


def _check_probes(job: SweepJob) -> None:
    """Refuse a sweep whose probes would cost more than the server's run budget (each point is
    probed with up to search.longest_probe requests per replica, the confirming probe's; the rate
    changes little of the cost). A trace's lengths are known only once it is read: each distinct
    workload is built once and the points are checked on its exact figures."""
    search, workloads = job.spec.search, {}
    for point in job.grid.points:
        num_requests = num_probe_requests(point.scenario, search.longest_probe)
        config = parse_config(probe_scenario(point.scenario, search.qps_max, num_requests), source="sweep")
        check_budget(config, settings().limits)            # from the scenario: before anything is read
        if config.workload.trace_file:
            key = config.workload.model_dump_json()
            if key not in workloads:
                workloads[key] = build_workload(config)
            check_budget(config, settings().limits, workloads[key])


def _stop_orphans(jobs: OrderedDict) -> None:
    """Stop the sweeps of sessions that have gone (their results could never be seen)."""
    for entry in jobs.values():
        if not entry.alive():
            entry.job.stop()


def _retire(jobs: OrderedDict, job_id: str) -> None:
    """Drop a job: stop it and, once its running points are done, remove its folder unless a
    kept job still uses it."""
    entry = jobs.pop(job_id)
    entry.job.stop()
    if any(other.folder == entry.folder for other in jobs.values()):
        return

    def remove() -> None:
        entry.job.join()
        shutil.rmtree(entry.folder, ignore_errors=True)
    threading.Thread(target=remove, name="sweep-cleanup", daemon=True).start()


def start_clicked(spec_data: dict, backend: str, address: str) -> None:
    """The Start button's callback (runs before the script, so no rerun can lose the click)."""
    try:
        start_job(spec_data, backend, address)
    except SimCoreError as error:
        st.session_state[ERROR_KEY] = str(error)


def stop_clicked() -> None:
    job = current_job()
    if job is not None:
        job.stop()


def show_start_error() -> None:
    """Show (once) why the last Start did not start a sweep."""
    message = st.session_state.pop(ERROR_KEY, None)
    if message:
        show_failure(message)
