"""Requests: a state timeline per request (sampled), sortable and filterable; pick one to
highlight it on the KV-cache map and the pipeline Gantt."""

import json

import pandas as pd
import streamlit as st

from explorer.frame import through_app
from explorer.state import SELECTED_KEY, result, scenario_json, selected_request, web_config
from explorer.views import derived
from explorer.widgets import session_value
from sim_core.results.sessions import session_columns, with_sessions
from sim_core.viz.timeline import (
    SORTS,
    pick_requests,
    selected_from_event,
    timeline_figure,
)
from sim_core.workload import build_workload_and_format

through_app()


@st.cache_data(max_entries=4, show_spinner=False)
def sessions_of(scenario_text: str) -> pd.DataFrame | None:
    """Each request's session and turn (None without sessions), from the scenario's workload."""
    return session_columns(build_workload_and_format(web_config(json.loads(scenario_text)))[0])


def timeline_view(run, scenario_text: str, order: str, replica: int | None, restarted: bool, limit: int,
                  selected: int | None) -> tuple[pd.DataFrame, object]:
    """The rows drawn and their timeline figure (a view of the run, cached with it)."""
    rows = pick_requests(with_sessions(run.requests, sessions_of(scenario_text)), order, replica, restarted, limit)
    return rows, timeline_figure(run, rows, selected)


st.title("Requests")
run = result("full")  # request state changes (timelines), block events
requests = with_sessions(run.requests, sessions_of(scenario_json()))   # the run is the scenario's
sorts = [name for name, (column, _) in SORTS.items() if column in requests.columns]
replicas = ["all", *(replica.id for replica in run.replicas)]
cols = st.columns([2, 1, 1, 1])
order = cols[0].selectbox("Sort by", sorts, key="rq_sort")
replica = cols[1].selectbox("Replica", replicas, key="rq_replica",
                            format_func=lambda r: r if r == "all" else run.replicas[r].name)
limit = cols[2].number_input("Rows", 10, 1000, 100, 10, key="rq_limit",
                             help="Requests drawn; with thousands of requests the timeline shows a sample.")
restarted = cols[3].toggle("Only restarted", key="rq_restarted")
rows, timeline = derived(run, timeline_view, scenario_json(), order, None if replica == "all" else replica,
                         bool(restarted), int(limit), selected_request())
st.caption(f"Showing {len(rows):,} of {len(requests):,} requests. Click a bar to select its request.")
event = st.plotly_chart(timeline, key="rq_timeline",
                        on_select="rerun", selection_mode="points")
picked = selected_from_event(event)
if picked is not None and picked != st.session_state.get("rq_last_click"):
    st.session_state["rq_last_click"] = st.session_state[SELECTED_KEY] = picked
    st.rerun()
choice = st.number_input("Selected request id (highlighted on KV cache and Pipeline)", 0, len(requests) - 1,
                         **session_value("rq", "pick", SELECTED_KEY))
if choice is not None:
    st.dataframe(requests[requests["request_id"] == choice].T.astype(str), width="stretch")
st.subheader("All requests")
st.dataframe(rows, hide_index=True, height=320)
