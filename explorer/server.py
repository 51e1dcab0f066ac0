"""Process-wide parts of the app server: its settings, its upload store, its run slots; and each
session's presence.

Each is made once per server process (`st.cache_resource`) and shared by every session; none
holds a session's data except the upload store, whose files are named by their content. A
session's presence is made once per session and released by Streamlit when it disconnects.
"""

from __future__ import annotations

import atexit
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import streamlit as st

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


class Presence:
    """Whether one browser session is still connected; read from any thread."""

    def __init__(self) -> None:
        self._gone = threading.Event()

    def alive(self) -> bool:
        return not self._gone.is_set()

    def leave(self) -> None:
        self._gone.set()


@st.cache_resource(scope="session", on_release=Presence.leave)
def presence() -> Presence:
    """This session's presence: Streamlit releases a session's resources when it disconnects,
    which ends it."""
    return Presence()


def session_alive() -> Callable[[], bool]:
    """A check, callable from any thread, of whether the browser session running this script is
    still connected (true until it disconnects; under AppTest, always)."""
    return presence().alive
