"""The selected request drives the time views: a page's time window follows the selection (the
Pipeline opens on the selected request; the KV map keeps the whole run and opens on the moment
the request holds most blocks) and "zoom to request" narrows the window to its lifetime.

A window slider's key names the selection (and the zoom), so a new selection is a new widget with
the request's window as its first value; no widget state is written by hand."""

from __future__ import annotations

import streamlit as st

from explorer.state import selected_request
from sim_core.results.result import SimulationResult
from sim_core.viz.timeline import request_window

ZOOMED = "zoomed_request"      # {page: request id the user zoomed to}


def time_window(page: str, run: SimulationResult, end: float, default: tuple[float, float],
                follow: bool, where=st, **slider) -> tuple[float, float]:
    """A "Time window (s)" slider over [0, end] for `page`: `default` without a selection; with
    one, the selected request's window when `follow` or after "zoom to request", else `default`.
    `slider`: more arguments for st.slider (help)."""
    selected = selected_request()
    life = None if selected is None else request_window(run.requests, selected, end)
    zoomed = life is not None and st.session_state.get(ZOOMED, {}).get(page) == selected
    first = life if life is not None and (follow or zoomed) else default
    key = f"{page}_window" if life is None else f"{page}_window_{selected}{'_zoom' if zoomed else ''}"
    return where.slider("Time window (s)", 0.0, max(end, 0.001), first, key=key, **slider)


def zoom_button(page: str, where=st) -> None:
    """ "Zoom to request #N": the page's window becomes the selected request's lifetime (again)."""
    selected = selected_request()
    if selected is not None:
        where.button(f"Zoom to request #{selected}", key=f"{page}_zoom", on_click=_zoom, args=(page, selected),
                     icon=":material/zoom_in:")


def _zoom(page: str, selected: int) -> None:
    zoomed = st.session_state.setdefault(ZOOMED, {})
    for key in [k for k in st.session_state if str(k).startswith(f"{page}_window_{selected}")]:
        del st.session_state[key]                    # a window the user moved goes back to the request's
    zoomed[page] = selected
