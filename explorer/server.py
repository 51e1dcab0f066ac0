"""Process-wide parts of the app server: its settings, its upload store, its run slots.

Each is made once per server process (`st.cache_resource`) and shared by every session; none
holds a session's data except the upload store, whose files are named by their content.
"""

from __future__ import annotations

import atexit
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from explorer.server_settings import ServerSettings
from explorer.upload_store import UploadStore
from sim_core.config.file_policy import confine_paths

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


@st.cache_resource
def settings() -> ServerSettings:
    """The settings whoever started the server chose (environment variables)."""
    return ServerSettings.from_environment()


@st.cache_resource
def uploads() -> UploadStore:
    """This server's private upload store."""
    chosen = settings()
    store = UploadStore(int(chosen.upload_quota_mb * 1024**2), chosen.upload_max_age_h * 3600)
    atexit.register(shutil.rmtree, store.root, ignore_errors=True)     # uploads do not outlive the server
    return store


@st.cache_resource
def run_slots() -> threading.BoundedSemaphore:
    """One slot per simulation allowed to run at once in this server."""
    return threading.BoundedSemaphore(settings().max_concurrent_runs)


def trace_roots() -> list[Path]:
    """The only folders a scenario from the web may name trace files in."""
    return [uploads().root, SAMPLES]


def confine(data: dict, source: str = "scenario") -> None:
    """Refuse a scenario from the web that names a file the server does not offer (see
    `sim_core.config.file_policy`)."""
    confine_paths(data, trace_roots(), settings().profile_roots, source)


def public_text(message: str) -> str:
    """A message with the server's own folders replaced by what the user knows them as."""
    return message.replace(str(uploads().root) + "/", "upload ").replace(str(SAMPLES) + "/", "sample ")


def session_alive() -> Callable[[], bool]:
    """A check, callable from any thread, of whether the browser session running this script is
    still connected (always true outside a running server, e.g. under AppTest)."""
    context = get_script_run_ctx()
    if context is None or not runtime.exists():
        return lambda: True
    session_id, instance = context.session_id, runtime.get_instance()
    return lambda: instance.is_active_session(session_id)
