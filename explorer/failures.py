"""Internal errors: one line with an id in the browser, the full traceback with that id in the
server's log (never a traceback or a server path in the page)."""

from __future__ import annotations

import logging
import os
import uuid

import streamlit as st

LOG = logging.getLogger("llm_explorer")
PROPAGATE = "SIM_EXPLORER_PROPAGATE_ERRORS"   # set by the test suite: AppTests see the exception itself


def report_internal_error(error: BaseException) -> str:
    """Log `error` with a fresh id and show the id; returns the id (re-raises `error` when the
    environment sets SIM_EXPLORER_PROPAGATE_ERRORS=1, as the test suite does)."""
    if os.environ.get(PROPAGATE) == "1":
        raise error
    error_id = uuid.uuid4().hex[:12]
    LOG.error("internal error %s: %s", error_id, type(error).__name__, exc_info=error)
    st.error(f"Something went wrong inside the explorer (error id {error_id}). The scenario is unchanged; "
             "whoever runs this server finds the details under that id in its log.", icon=":material/bug_report:")
    return error_id
