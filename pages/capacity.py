"""Capacity: for every configuration around the current scenario, the highest arrival rate that
meets the SLOs; cost, Pareto views, and any point in detail."""

import streamlit as st
import yaml

from explorer.capacity_inputs import PAGE, sweep_spec
from explorer.capacity_jobs import (
    current_job,
    show_start_error,
    start_clicked,
    stop_clicked,
)
from explorer.capacity_results import leave_if_opened, progress, results
from explorer.frame import through_app
from explorer.server import settings
from explorer.state import scenario, show_failure
from explorer.widgets import page_value

through_app()
leave_if_opened()

st.title("Capacity planning")
st.caption("Each configuration's capacity is found by a bracketing search on the arrival rate (each probe "
           "simulates the workload's first N requests at that rate); sweeps run in the background.")
spec, problems = sweep_spec(scenario())
for problem in problems:
    show_failure(problem)
with st.expander("Sweep spec (YAML), to run it with `python -m sim_core sweep --spec FILE --out DIR`"):
    text = yaml.safe_dump(spec, sort_keys=False)
    st.code(text, language="yaml")
    st.download_button("Download sweep spec", text, "sweep.yaml", key="cap_download")
cols = st.columns([1, 2, 1, 1])
clusters = list(settings().ray_addresses)      # chosen by whoever started the server, never typed in
backend = cols[0].radio("Run on", ["local", "ray"] if clusters else ["local"], horizontal=True,
                        **page_value(PAGE, "backend", "local"))
if clusters:
    address = cols[1].selectbox("Ray cluster", clusters, disabled=backend == "local",
                                **page_value(PAGE, "address", clusters[0]))
else:
    address = ""
    cols[1].caption("Ray: whoever starts this server can allow clusters (SIM_EXPLORER_RAY_ADDRESSES).")
cols[2].button("Start sweep", type="primary", disabled=bool(problems), key="cap_start", on_click=start_clicked,
               args=(spec, backend, address))
job = current_job()
cols[3].button("Stop", key="cap_stop", disabled=job is None, on_click=stop_clicked)
show_start_error()
if job is None:
    st.info("Choose what to vary and press Start sweep.", icon=":material/info:")
    st.stop()
running = job.snapshot().status == "running"
st.fragment(progress, run_every=1.0 if running else None)(job)
state = job.snapshot()
if state.records:
    results(job, state.records, float(spec["gpu_hour_usd"]))
