"""Requests: a state timeline per request (sampled), sortable and filterable; pick one to
highlight it on the KV-cache map and the pipeline Gantt."""

import streamlit as st

from explorer.frame import through_app
from explorer.state import SELECTED_KEY, result, selected_request
from explorer.widgets import session_value
from sim_core.viz.timeline import (
    SORTS,
    pick_requests,
    selected_from_event,
    timeline_figure,
)

through_app()

st.title("Requests")
run = result()
requests = run.requests
replicas = ["all", *(replica.id for replica in run.replicas)]
cols = st.columns([2, 1, 1, 1])
order = cols[0].selectbox("Sort by", list(SORTS), key="rq_sort")
replica = cols[1].selectbox("Replica", replicas, key="rq_replica",
                            format_func=lambda r: r if r == "all" else run.replicas[r].name)
limit = cols[2].number_input("Rows", 10, 1000, 100, 10, key="rq_limit",
                             help="Requests drawn; with thousands of requests the timeline shows a sample.")
restarted = cols[3].toggle("Only restarted", key="rq_restarted")
rows = pick_requests(requests, order, None if replica == "all" else replica, restarted, int(limit))
st.caption(f"Showing {len(rows):,} of {len(requests):,} requests. Click a bar to select its request.")
event = st.plotly_chart(timeline_figure(run, rows, selected_request()), key="rq_timeline",
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
