"""Sweeps started from the Capacity page.

A job runs on a background thread owned by a process-wide registry (`st.cache_resource`), not by
the script run that started it, and the page polls it. Only the session that started a job knows
its id, so no session sees another's sweep. Each job keeps a journal in a folder named by the
session (journal lines are keyed by point), so starting a sweep again resumes its finished points. Ray is only
ever joined (`ray.init(address=...)`), never started here.
"""

from __future__ import annotations

import tempfile
import threading
import uuid
from collections import OrderedDict
from pathlib import Path

import streamlit as st

from sim_core import SimCoreError
from sim_core.sweep import LocalBackend, RayBackend, parse_sweep_spec
from sim_core.sweep.job import SweepJob

JOB_KEY, SESSION_KEY, ERROR_KEY = "capacity_job", "capacity_session", "capacity_error"
MAX_JOBS = 16
SWEEP_ROOT = Path(tempfile.gettempdir()) / "sim_core_sweeps"


@st.cache_resource
def _jobs() -> tuple[OrderedDict, threading.Lock]:
    return OrderedDict(), threading.Lock()


def current_job() -> SweepJob | None:
    """The last job this session started (None if none, or the server restarted)."""
    jobs, lock = _jobs()
    with lock:
        return jobs.get(st.session_state.get(JOB_KEY))


def start_job(spec_data: dict, backend: str, address: str = "", workers: int | None = None) -> SweepJob:
    """Validate the spec and start it, stopping this session's previous sweep (raises
    ConfigError naming what is wrong)."""
    spec, base = parse_sweep_spec(spec_data, source="sweep")
    runner = RayBackend(address) if backend == "ray" else LocalBackend(workers)
    previous = current_job()
    if previous is not None:
        previous.stop()
    session = st.session_state.setdefault(SESSION_KEY, uuid.uuid4().hex)
    job = SweepJob(spec, base, runner, SWEEP_ROOT / session).start()
    job_id = uuid.uuid4().hex
    jobs, lock = _jobs()
    with lock:
        jobs[job_id] = job
        while len(jobs) > MAX_JOBS:
            oldest = next(iter(jobs))
            jobs.pop(oldest).stop()
    st.session_state[JOB_KEY] = job_id
    return job


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
        st.error(message, icon=":material/error:")
