"""The scenario mirrored in the URL (`?s=<token>`), so a link reproduces the view."""

from __future__ import annotations

import streamlit as st

from explorer.state import ERROR_KEY, scenario
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
    replace_scenario(candidate)


def write_url() -> None:
    """Keep `?s=` equal to the current scenario."""
    token = encode_scenario(scenario())
    if st.query_params.get("s") != token:
        st.query_params["s"] = token
