"""The app's frame: its pages, and the one way a page runs (inside app.py, after the URL and the
sidebar).

Streamlit starts a server in its legacy pages-folder mode when a `pages/` folder exists, and
leaves it once a run calls `st.navigation`. In that mode a deep link such as `/kv_cache` as the
first request to a fresh server runs the page script alone: no sidebar knobs, no URL sync. So
app.py runs the page inside `framed()`, and every page calls `through_app()` first: outside the
frame it registers the app's navigation (which ends that mode) and reruns, and the rerun goes
through app.py, whose navigation opens the same page. A page whose rerun still comes outside the
frame is its run's main script (`streamlit run pages/x.py`, a test of one page) and runs alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import streamlit as st

_FRAMED: ContextVar[bool] = ContextVar("explorer_framed", default=False)   # set while app.py runs a page
REROUTED_KEY = "rerouted_through_app"     # a page asked for a rerun through app.py and has not been framed since
PAGES = Path(__file__).resolve().parents[1] / "pages"     # absolute: valid whatever the run's main script


def pages() -> list:
    """The app's pages (st.Page), in the sidebar's order; the first is the default."""
    return [
        st.Page(PAGES / "overview.py", title="Overview", icon=":material/monitoring:", default=True),
        st.Page(PAGES / "scenario.py", title="Scenario", icon=":material/tune:"),
        st.Page(PAGES / "workload.py", title="Workload", icon=":material/dataset:"),
        st.Page(PAGES / "kv_cache.py", title="KV cache", icon=":material/grid_view:"),
        st.Page(PAGES / "requests.py", title="Requests", icon=":material/view_timeline:"),
        st.Page(PAGES / "pipeline.py", title="Pipeline", icon=":material/view_kanban:"),
        st.Page(PAGES / "memory.py", title="Memory", icon=":material/memory:"),
        st.Page(PAGES / "predictor.py", title="Predictor", icon=":material/speed:"),
        st.Page(PAGES / "compare.py", title="Compare", icon=":material/compare_arrows:"),
        st.Page(PAGES / "capacity.py", title="Capacity", icon=":material/query_stats:"),
        st.Page(PAGES / "accuracy.py", title="Accuracy", icon=":material/fact_check:"),
    ]


@contextmanager
def framed() -> Iterator[None]:
    """Run the page inside this block as app.py's (around `navigation.run()`)."""
    token = _FRAMED.set(True)
    st.session_state.pop(REROUTED_KEY, None)
    try:
        yield
    finally:
        _FRAMED.reset(token)


def through_app() -> None:
    """Rerun through app.py if this page was started on its own (called first by every page)."""
    if _FRAMED.get() or st.session_state.get(REROUTED_KEY):
        return
    st.session_state[REROUTED_KEY] = True
    st.navigation(pages())
    st.rerun()
