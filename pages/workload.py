"""Workload: upload a trace or generate one; see its shape and validation report; use it."""

import json

import streamlit as st

from explorer.frame import through_app
from explorer.safe_text import plain
from explorer.server import public_text, settings
from explorer.state import scenario, show_failure, try_scenario, web_config
from explorer.uploads import check_trace
from explorer.widgets import page_value
from explorer.workload_inputs import PAGE, WL, generator_spec
from sim_core import SimCoreError
from sim_core.engine.budget import check_budget
from sim_core.viz import (
    arrival_rate_figure,
    length_histogram_figure,
    length_scatter_figure,
    report_rows,
)
from sim_core.workload import ReadOptions, build_workload_and_format

through_app()

FORMATS = ["auto", "canonical", "vidur", "vidur_lengths", "azure", "burstgpt", "mooncake"]
LAST_TRACE, USED, NAMES = "wl_last_trace", "wl_used", "wl_trace_names"   # NAMES: stored path -> the file's name
SOURCES = ["Current scenario", "Generate", "Upload a trace"]


@st.cache_data(show_spinner="Reading the workload...", max_entries=4)
def preview(scenario_json: str):
    """The workload a scenario describes, and where it came from (format or 'synthetic')."""
    config = web_config(json.loads(scenario_json))
    check_budget(config, settings().limits)          # before any request is generated or read
    return build_workload_and_format(config)


def use(candidate: dict, count: int) -> None:
    """The Use button's callback: it runs before the script, so the sidebar shows the new
    workload in the same run and no rerun can lose the click."""
    if try_scenario(candidate):
        st.session_state[USED] = count


current = scenario()
st.title("Workload")
source = st.radio("Source", SOURCES, horizontal=True, **page_value(PAGE, "source", SOURCES[0]))
if source == "Current scenario":
    spec = current["workload"]
elif source == "Upload a trace":
    upload = st.file_uploader("Trace file (CSV or JSON lines)", key="wl_upload", help=WL["trace_file"].description)
    fmt = st.selectbox("Format", FORMATS, help=WL["trace_format"].description, **page_value(PAGE, "format", FORMATS[0]))
    skip = st.checkbox("Skip bad rows (and count them)", help=WL["on_bad_rows"].description,
                       **page_value(PAGE, "skip", False))
    if upload is None:
        st.info("Upload a trace: Vidur, Azure (2023/2024), BurstGPT, Mooncake JSON lines or our canonical CSV.")
        st.stop()
    options = ReadOptions(format=fmt, on_bad_rows="skip" if skip else "error")
    path, problem, _ = check_trace(upload.name, upload.getvalue(), options)
    if path is None:
        show_failure(problem)
        st.stop()
    st.session_state.setdefault(NAMES, {})[str(path)] = upload.name
    spec = {"trace_file": str(path), "trace_format": fmt, "on_bad_rows": "skip" if skip else "error"}
else:
    spec = generator_spec(st.session_state.get(LAST_TRACE))

candidate = {**current, "workload": spec}
try:
    workload, origin = preview(json.dumps(candidate, sort_keys=True))
except SimCoreError as error:
    message = str(error)
    for stored, name in st.session_state.get(NAMES, {}).items():   # the user's file name, not the store's
        message = message.replace(stored, name)
    show_failure(message)
    st.caption("The scenario keeps its previous workload.")
    st.stop()
if source == "Upload a trace":
    st.session_state[LAST_TRACE] = spec["trace_file"]   # the generator may resample it

st.subheader("Validation report")
st.table([{"item": row["item"], "value": plain(public_text(row["value"]), 300)}   # cells render Markdown
          for row in report_rows(workload, origin)])
st.plotly_chart(arrival_rate_figure(workload), key="wl_rate")
left, right = st.columns(2)
left.plotly_chart(length_histogram_figure(workload), key="wl_hist")
right.plotly_chart(length_scatter_figure(workload), key="wl_scatter")
if source == "Current scenario":
    st.caption("The workload of the current scenario; generate or upload another to replace it.")
else:
    st.button("Use this workload for the scenario", type="primary", key="wl_use", on_click=use,
              args=(candidate, len(workload)))
if USED in st.session_state:
    st.success(f"The scenario now uses this workload ({st.session_state.pop(USED):,} requests).")
