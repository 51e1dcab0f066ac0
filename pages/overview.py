"""Overview: run the scenario, headline metrics, pipeline Gantt, Chrome trace download."""

import json

import streamlit as st

from pages.state import scenario, simulate
from sim_core import SimCoreError
from sim_core.config import SimulationConfig
from sim_core.export import chrome_trace
from sim_core.viz import pipeline_gantt

current = scenario()
st.title("LLM serving scheduling explorer")
st.caption(current.get("name") or "scenario")

with st.sidebar:
    st.subheader("Scenario")
    fields = SimulationConfig.model_fields
    policy = st.selectbox("Replica scheduler", ["vllm", "sarathi", "orca", "faster_transformer"],
                          index=["vllm", "sarathi", "orca", "faster_transformer"].index(current["scheduler"]["type"]),
                          help=fields["scheduler"].annotation.model_fields["type"].description, key="ov_policy")
    replicas = st.slider("Replicas", 1, 8, current["cluster"]["num_replicas"], key="ov_replicas")
    stages = st.select_slider("Pipeline stages (PP)", [1, 2, 4], current["cluster"]["pipeline_parallel_size"], key="ov_pp")
    qps = st.slider("Arrival rate (requests/s)", 0.5, 40.0, float(current["workload"]["arrival"]["qps"]), 0.5,
                    key="ov_qps")

updated = json.loads(json.dumps(current))
updated["scheduler"]["type"] = policy
updated["cluster"].update(num_replicas=replicas, pipeline_parallel_size=stages)
updated["workload"]["arrival"]["qps"] = qps
st.session_state["scenario"] = updated

try:
    result = simulate(json.dumps(updated, sort_keys=True))
except SimCoreError as error:
    st.error(str(error))
    st.stop()

summary = result.summary
cols = st.columns(6)
cols[0].metric("Throughput (req/s)", f"{summary['throughput_rps']:.2f}")
cols[1].metric("Output tokens/s", f"{summary['output_tokens_per_s']:.0f}")
cols[2].metric("TTFT p50 / p99 (ms)", f"{summary['ttft_p50_s'] * 1e3:.0f} / {summary['ttft_p99_s'] * 1e3:.0f}")
cols[3].metric("TBT p50 / p99 (ms)", f"{summary['tbt_p50_s'] * 1e3:.0f} / {summary['tbt_p99_s'] * 1e3:.0f}")
cols[4].metric("Preemptions", summary["num_preemptions"])
cols[5].metric("KV use mean / peak", f"{summary['kv_utilization_mean']:.0%} / {summary['kv_utilization_peak']:.0%}")

st.subheader("Pipeline stages")
end = float(result.batch_stages["end"].max()) if len(result.batch_stages) else 1.0
window = st.slider("Time window (s)", 0.0, end, (0.0, min(end, 5.0)), key="ov_window")
st.plotly_chart(pipeline_gantt(result, *window), key="ov_gantt")
st.download_button("Download Chrome trace (Perfetto)", json.dumps(chrome_trace(result)),
                   file_name="chrome_trace.json", mime="application/json", key="ov_trace")
for note in result.notes:
    st.caption(note)
