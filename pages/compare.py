"""Compare: the current scenario against up to five edits of it, on the same workload."""

import streamlit as st

from explorer.compare_inputs import PAGE, variant_editors, variant_scenarios
from explorer.frame import through_app
from explorer.safe_text import plain
from explorer.state import result_of, scenario
from explorer.widgets import page_value
from sim_core.results.compare import comparison_table, difference_frame, diverging_requests
from sim_core.viz.compare import (
    kv_overlay,
    preemption_overlay,
    queue_overlay,
    synced_timelines,
    throughput_overlay,
)
from sim_core.viz.overview import latency_cdfs

through_app()

PICKS = {"largest TTFT difference": "ttft", "largest end-to-end difference": "e2e", "first requests": None}

st.title("Compare")
st.caption("A is the current scenario (change it in the sidebar); B and the others change only the "
           "fields set below. Every scenario runs the same workload, so request ids match.")
base = scenario()
count = st.number_input("Scenarios", 2, 6, **page_value(PAGE, "count", 2))
named, problems = variant_scenarios(base, variant_editors(base, int(count)))
for problem in problems:
    st.warning(plain(problem, 400), icon=":material/warning:")
runs = {name: result_of(data) for name, data in named.items()}

st.subheader("Differences")
st.dataframe(difference_frame(comparison_table(runs)), hide_index=True, key="cmp_table")
st.caption("Each value with its difference to A; the winner per metric and its margin over the runner-up.")
st.subheader("Latency CDFs")
st.plotly_chart(latency_cdfs({name: run.requests for name, run in runs.items()}), key="cmp_cdf")
left, right = st.columns(2)
with left:
    st.subheader("Throughput over time")
    st.plotly_chart(throughput_overlay(runs), key="cmp_throughput")
    st.subheader("KV-cache use")
    st.plotly_chart(kv_overlay(runs), key="cmp_kv")
with right:
    st.subheader("Waiting requests")
    st.plotly_chart(queue_overlay(runs), key="cmp_queue")
    st.subheader("Preemptions")
    st.plotly_chart(preemption_overlay(runs), key="cmp_preemptions")

st.subheader("Request timelines")
cols = st.columns([2, 1])
pick = cols[0].selectbox("Requests", list(PICKS), **page_value(PAGE, "pick", "largest TTFT difference"))
limit = cols[1].number_input("How many", 1, 100, **page_value(PAGE, "rows", 15))
tables = {name: run.requests for name, run in runs.items()}
column, first = PICKS[pick], next(iter(tables.values()))
ids = diverging_requests(tables, column, int(limit)) if column else first["request_id"].head(int(limit)).tolist()
st.plotly_chart(synced_timelines(runs, ids), key="cmp_timelines")
