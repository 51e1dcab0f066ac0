"""Workload: upload a trace or generate one; see its shape and validation report; use it."""

import json

import streamlit as st

from pages.state import scenario
from pages.uploads import save_upload
from sim_core import SimCoreError, parse_config
from sim_core.config import ArrivalConfig, LengthConfig, WorkloadConfig
from sim_core.viz import arrival_rate_figure, length_histogram_figure, length_scatter_figure, report_rows
from sim_core.workload import build_workload_and_format

FORMATS = ["auto", "canonical", "vidur", "vidur_lengths", "azure", "burstgpt", "mooncake"]
PROCESSES = ["poisson", "gamma", "static", "bursty", "diurnal"]
DISTRIBUTIONS = ["uniform", "fixed", "zipf", "lognormal"]
WL, AR, LN = WorkloadConfig.model_fields, ArrivalConfig.model_fields, LengthConfig.model_fields


@st.cache_data(show_spinner="Reading the workload...", max_entries=4)
def preview(scenario_json: str):
    """The workload a scenario describes, and where it came from (format or 'synthetic')."""
    return build_workload_and_format(parse_config(json.loads(scenario_json)))


def lengths(label: str, default: dict, key: str) -> dict:
    kind = st.selectbox(f"{label} distribution", DISTRIBUTIONS, key=f"wl_{key}_dist", help=LN["distribution"].description)
    low, high = st.slider(f"{label} tokens (min, max)", 1, 16384, (default.get("min", 16), default.get("max", 1024)),
                          key=f"wl_{key}_range", help=LN["min"].description)
    typical = st.number_input(f"{label}: fixed value / lognormal mean", 1, 16384, default.get("value", 256),
                              key=f"wl_{key}_typical", help=LN["mean"].description)
    return {"distribution": kind, "min": low, "max": high, "value": typical, "mean": float(typical)}


current = scenario()
st.title("Workload")
source = st.radio("Source", ["Generate", "Upload a trace"], horizontal=True, key="wl_source")
if source == "Upload a trace":
    upload = st.file_uploader("Trace file (CSV or JSON lines)", key="wl_upload", help=WL["trace_file"].description)
    fmt = st.selectbox("Format", FORMATS, key="wl_format", help=WL["trace_format"].description)
    skip = st.checkbox("Skip bad rows (and count them)", key="wl_skip", help=WL["on_bad_rows"].description)
    if upload is None:
        st.info("Upload a trace: Vidur, Azure (2023/2024), BurstGPT, Mooncake JSON lines or our canonical CSV.")
        st.stop()
    try:
        path = save_upload(upload)
    except ValueError as error:
        st.error(str(error))
        st.stop()
    spec = {"trace_file": str(path), "trace_format": fmt, "on_bad_rows": "skip" if skip else "error"}
else:
    cols = st.columns(3)
    process = cols[0].selectbox("Arrival process", PROCESSES, key="wl_process", help=AR["process"].description)
    qps = cols[1].number_input("Rate (req/s)", 0.1, 10_000.0, 4.0, key="wl_qps", help=AR["qps"].description)
    count = cols[2].number_input("Requests", 1, 1_000_000, 500, key="wl_count", help=WL["num_requests"].description)
    left, right = st.columns(2)
    with left:
        prompt = lengths("Prompt", {"min": 64, "max": 1024}, "prompt")
    with right:
        output = lengths("Output", {"min": 16, "max": 512}, "output")
    spec = {"num_requests": int(count), "arrival": {"process": process, "qps": qps, "cv": 2.0},
            "prompt_tokens": prompt, "output_tokens": output}

candidate = {**current, "workload": spec}
try:
    workload, origin = preview(json.dumps(candidate, sort_keys=True))
except SimCoreError as error:
    st.error(str(error))
    st.caption("The scenario keeps its previous workload.")
    st.stop()

st.subheader("Validation report")
st.table(report_rows(workload, origin))
st.plotly_chart(arrival_rate_figure(workload), key="wl_rate")
left, right = st.columns(2)
left.plotly_chart(length_histogram_figure(workload), key="wl_hist")
right.plotly_chart(length_scatter_figure(workload), key="wl_scatter")
if st.button("Use this workload for the scenario", type="primary", key="wl_use"):
    st.session_state["scenario"] = candidate
    st.success(f"The scenario now uses this workload ({len(workload):,} requests).")
