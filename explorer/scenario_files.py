"""Scenario page parts that deal with files: presets, YAML import/export, trace upload."""

from __future__ import annotations

import copy
from pathlib import Path

import streamlit as st

from explorer.safe_text import plain
from explorer.server import SAMPLES
from explorer.state import ERROR_KEY, get_path, scenario, show_failure, web_config, with_path
from explorer.uploads import check_scenario_file, check_trace
from explorer.widgets import replace_scenario
from sim_core.config import config_to_yaml
from sim_core.scenarios.presets import PRESETS, preset

TRACE_REPORT, TRACE_ERROR, TRACE_NAMES = "sc_trace_report", "sc_trace_error", "sc_trace_names"


def presets_row() -> None:
    """Pick a teaching preset; loading it replaces the scenario (and every widget's value)."""
    left, right = st.columns([3, 1])
    name = left.selectbox("Preset", [p.name for p in PRESETS], key="sc_preset")
    right.button("Load preset", key="sc_load", type="primary", width="stretch",
                 on_click=lambda: replace_scenario(copy.deepcopy(preset(name).scenario)))
    chosen = preset(name)
    st.caption(f"{chosen.lesson} **Look at:** {chosen.look_at}")   # shipped text, not input


def files_row() -> None:
    """Import a scenario file (validated before it replaces anything) or export the current one."""
    left, right = st.columns([3, 1])
    left.file_uploader("Import scenario (YAML or JSON)", type=["yaml", "yml", "json"], key="sc_import",
                       on_change=_import)
    right.download_button("Export scenario YAML", config_to_yaml(web_config(scenario())),
                          file_name="scenario.yaml", mime="application/x-yaml", key="sc_export", width="stretch",
                          on_click="ignore")


def _import() -> None:
    upload = st.session_state.get("sc_import")
    if upload is None:
        return
    mapping, error = check_scenario_file(upload.name, upload.getvalue())
    if error:
        st.session_state[ERROR_KEY] = error
    else:
        replace_scenario(mapping)


def trace_source() -> None:
    """Replay an uploaded trace or a bundled sample; the report or the error shows below."""
    st.file_uploader("Upload a trace CSV or JSONL (Vidur, Azure, BurstGPT, Mooncake or canonical; detected "
                     "from its columns)", type=["csv", "jsonl"],
                     key="sc_trace", on_change=_upload)
    samples = sorted(p.name for p in SAMPLES.glob("*.csv"))
    st.selectbox("...or replay a sample trace", [None, *samples], key="sc_sample", on_change=_sample)
    if st.session_state.get(TRACE_ERROR):
        show_failure(st.session_state[TRACE_ERROR])
    for line in st.session_state.get(TRACE_REPORT, []):
        st.caption(plain(line))
    current = get_path(scenario(), "workload.trace_file")
    if current:
        shown = st.session_state.get(TRACE_NAMES, {}).get(current, Path(current).name)
        st.success(f"Replaying {plain(shown, 120)}", icon=":material/check_circle:")


def _upload() -> None:
    upload = st.session_state.get("sc_trace")
    if upload is not None:
        _use_trace(upload.name, upload.getvalue())


def _sample() -> None:
    name = st.session_state.get("sc_sample")
    if name:
        _use_trace(name, (SAMPLES / name).read_bytes())


def _use_trace(name: str, data: bytes) -> None:
    path, error, report = check_trace(name, data)
    st.session_state[TRACE_ERROR], st.session_state[TRACE_REPORT] = error, report
    if path is not None:
        st.session_state.setdefault(TRACE_NAMES, {})[str(path)] = name
        replace_scenario(with_path(scenario(), "workload.trace_file", str(path)))
