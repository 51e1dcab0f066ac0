"""Make every run go through `app.py`.

Streamlit starts each server (and each AppTest run) in its legacy "pages folder" mode whenever a
`pages/` folder exists, and leaves it only when a run calls `st.navigation`. In that mode a deep
link such as `/kv_cache` runs the page script alone: no sidebar knobs, no URL sync. Every page
calls `through_app()` first; in that mode it switches the mode off and reruns, and the rerun
executes `app.py`, whose navigation opens the same page.
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def through_app() -> None:
    """Rerun through app.py if this page was started on its own."""
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
