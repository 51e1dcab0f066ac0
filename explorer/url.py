"""The scenario mirrored in the URL (`?s=<token>`), so a link reproduces the view."""

from __future__ import annotations

from pathlib import PurePosixPath

import streamlit as st

from explorer.server import uploads
from explorer.state import ERROR_KEY, scenario
from explorer.upload_store import STORE_NAME
from explorer.widgets import replace_scenario
from sim_core import SimCoreError
from sim_core.config.share import decode_scenario, encode_scenario

READ_KEY = "url_read"


def read_url() -> None:
    """On a session's first run, adopt the scenario in the link (if any and if valid)."""
    if st.session_state.get(READ_KEY):
        return
    st.session_state[READ_KEY] = True
    token = st.query_params.get("s")
    if not token:
        return
    try:
        candidate = decode_scenario(token)
    except SimCoreError as error:
        st.session_state[ERROR_KEY] = str(error)
        return
    missing = _local_uploads(candidate)
    if missing:
        st.session_state[ERROR_KEY] = (
            f"scenario link: it uses an uploaded trace (content hash {missing[:12]}...) that is not on this "
            "server; upload the same file on the Workload page and open the link again")
        return
    replace_scenario(candidate)


def _local_uploads(data: dict) -> str:
    """Point the link's uploaded traces (named by their content hash, on whichever server made
    the link) at this server's upload store; the hash of the first one not stored here, else ""."""
    for key, value in data.items():
        if isinstance(value, dict):
            missing = _local_uploads(value)
            if missing:
                return missing
        elif key == "trace_file" and isinstance(value, str) and STORE_NAME.match(PurePosixPath(value).name):
            local = uploads().root / PurePosixPath(value).name
            if not local.is_file():
                return PurePosixPath(value).stem
            data[key] = str(local)
    return ""


def write_url() -> None:
    """Keep `?s=` equal to the current scenario."""
    token = encode_scenario(scenario())
    if st.query_params.get("s") != token:
        st.query_params["s"] = token
