"""Accuracy: an uploaded measured run (inference-perf folder, vllm bench serve JSON, per-request
log) replayed through the simulator, measured against simulated figure by figure."""

import hashlib

import streamlit as st

from explorer.accuracy_inputs import app_message, replay_uploaded, run_files
from explorer.frame import through_app
from explorer.safe_text import plain
from explorer.state import show_failure
from explorer.widgets import page_value
from sim_core import SimCoreError
from sim_core.accuracy.compare import comparison, median_errors
from sim_core.accuracy.layouts import LAYOUTS
from sim_core.catalog import DEVICES
from sim_core.viz.accuracy import measured_vs_simulated_cdfs

through_app()

PAGE, RESULT_KEY, PRESSED_KEY, FROM_FILES = "acc", "acc_result", "acc_pressed", "as the files name it"


def press() -> None:
    """Replay was pressed (kept in a callback: app.py may rerun the page before it reads the button)."""
    st.session_state[PRESSED_KEY] = True


st.title("Accuracy against a measured run")
kinds = "; ".join(plain(layout.describe.replace("`", ""), 120) for layout in LAYOUTS)
st.caption(f"Upload a benchmark of a real vLLM server: {kinds}. Upload a run folder's files together (or one "
           "zip of the folder). The replay rebuilds the client's load and runs the server's settings through the "
           "simulator.")
uploads = st.file_uploader("Measured run", type=["yaml", "yml", "json", "jsonl", "zip"], accept_multiple_files=True,
                           key="acc_upload")
cols = st.columns([2, 2, 1])
device = cols[0].selectbox("GPU", [FROM_FILES, *DEVICES], help="The GPU to replay on when the files name none "
                           "(vllm bench serve results never do).", **page_value(PAGE, "device", FROM_FILES))
override = cols[1].toggle("Replay on this GPU even when the files name another", disabled=device == FROM_FILES,
                          **page_value(PAGE, "override", False))
cols[2].button("Replay", type="primary", disabled=not uploads, key="acc_replay", on_click=press)
if not uploads:
    st.info("Upload a measured run, then press Replay.", icon=":material/info:")
    st.stop()

files = [(upload.name, upload.getvalue()) for upload in uploads]
chosen = None if device == FROM_FILES else device
digest = hashlib.sha256(repr((sorted((n, hashlib.sha256(d).hexdigest()) for n, d in files), chosen,
                              override)).encode()).hexdigest()
if st.session_state.pop(PRESSED_KEY, False):
    try:
        name, run = run_files(files)
        with st.spinner("Replaying the measured run through the simulator..."):
            replays = replay_uploaded(name, run, chosen, override)
    except SimCoreError as error:
        show_failure(app_message(str(error)))
        st.stop()
    st.session_state[RESULT_KEY] = (digest, replays)
stored = st.session_state.get(RESULT_KEY)
if stored is None or stored[0] != digest:
    st.info("Press Replay to simulate the uploaded run (a replay takes a few seconds).", icon=":material/info:")
    st.stop()
replays = stored[1]

table = comparison(replays)
st.subheader("Median absolute error (whole run)")
medians = median_errors(table)
st.dataframe({"figure": list(medians), "median |error| %": [round(value, 1) for value in medians.values()]},
             hide_index=True, key="acc_medians")
st.subheader("Measured against simulated")
shown = table.assign(measured_ms=table["measured_s"] * 1000, simulated_ms=table["simulated_s"] * 1000)
st.dataframe(shown[["run", "stage", "metric", "stat", "measured_ms", "simulated_ms", "error_pct"]].round(2),
             hide_index=True, key="acc_table")
st.caption("Stage `all` is the whole run; itl is the time per output token from the means. Error % is "
           "(simulated - measured) / measured.")
for index, item in enumerate(replays):
    run = item.run
    scenario = run.scenario
    st.subheader(plain(run.name, 80))
    st.caption(plain(f"{run.layout}: {scenario['model']} on {scenario['device']}, TP "
                     f"{scenario['cluster']['tensor_parallel_size']}, {len(run.workload):,} requests", 300))
    for note in run.notes:
        st.caption(plain(note, 400))
    if run.saturated:
        st.warning("The measured server did not answer every request: its figures are those of the answered ones.",
                   icon=":material/warning:")
    if item.collapsed:
        st.warning("The simulated queue grows without bound: the simulator predicts this load overloads the server.",
                   icon=":material/warning:")
    if run.requests is not None:
        st.plotly_chart(measured_vs_simulated_cdfs(run.requests, item.result.requests), key=f"acc_cdf_{index}")
