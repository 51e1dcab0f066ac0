"""Shared page state: the scenario (kept outside widgets) and the cached simulation."""

from __future__ import annotations

import streamlit as st

from sim_core import parse_config, run_simulation
from sim_core.scenarios import DEFAULT_SCENARIO

SCENARIO_KEY = "scenario"


def scenario() -> dict:
    """The session's scenario as a plain dict (widgets edit copies; pages write it back)."""
    if SCENARIO_KEY not in st.session_state:
        st.session_state[SCENARIO_KEY] = DEFAULT_SCENARIO
    return st.session_state[SCENARIO_KEY]


@st.cache_data(show_spinner="Simulating...", max_entries=16)
def simulate(scenario_json: str):
    """Run (or reuse) the simulation of a scenario, keyed on its canonical JSON."""
    return run_simulation(parse_config(_loads(scenario_json)))


def _loads(text: str) -> dict:
    import json

    return json.loads(text)
