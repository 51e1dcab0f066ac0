"""Memory: the planner's budget of one GPU (weights, activations, reserve or non-torch memory, KV)
and what it buys."""

import streamlit as st

from explorer.bind import bound
from explorer.frame import through_app
from explorer.safe_text import plain
from explorer.state import scenario, show_failure, web_config
from sim_core import SimCoreError
from sim_core.cluster.pools import pool_views
from sim_core.memory import plan_memory
from sim_core.memory import planner as planners
from sim_core.memory.breakdown import memory_breakdown
from sim_core.viz.memory import memory_facts, memory_figure, memory_parts

through_app()

st.title("Memory")
config = web_config(scenario())
resolved = config.memory.planner if config.memory.planner != "auto" else config.scheduler.traits.memory_planner
VLLM_KNOBS = {"memory.gpu_memory_utilization": "gpu_memory_utilization",
              "memory.non_torch_gib": "Non-torch (GiB; empty: fitted)", "memory.cuda_graph_gib": "CUDA graphs (GiB)"}
knobs = VLLM_KNOBS if resolved == "vllm" else {"memory.margin_fraction": "Margin (fraction of device memory)"}
cols = st.columns(2 + len(knobs))
with cols[0]:
    bound("memory.planner", "memory", "Planner")
for slot, (path, label) in zip(cols[1:], knobs.items()):
    with slot:
        bound(path, "memory", label)
with cols[-1]:
    bound("max_model_len", "memory", "max_model_len")
pools = {view.name: view.config for view in pool_views(config)}   # P/D: each pool plans its own GPUs
pool = st.selectbox("Pool", list(pools), key="mem_pool") if len(pools) > 1 else None
shape = pools[pool] if pool else config
try:
    plan = plan_memory(shape)
    breakdown = memory_breakdown(shape, plan)
except SimCoreError as error:
    show_failure(str(error))
    st.stop()
cluster = shape.cluster
moe = (f", {cluster.data_parallel_size} x DP, EP {cluster.expert_parallel_size}: one DP rank shown"
       if cluster.data_parallel_size > 1 or cluster.expert_parallel_size > 1 else "")
label = f"{plain(config.device, 80)} ({cluster.tensor_parallel_size} x TP, {cluster.pipeline_parallel_size} x PP{moe})"
st.caption(f"{plain(config.model, 80)} on {label}: one bar per pipeline stage's GPU; the tightest stage decides the "
           "KV capacity of the replica.")
st.plotly_chart(memory_figure(breakdown, config.device), key="mem_bar")
facts = list(memory_facts(breakdown, plan).items())
for start in range(0, len(facts), 3):      # three to a row: no label is cut off
    for slot, (name, value) in zip(st.columns(3), facts[start:start + 3]):
        slot.metric(name, value)
st.caption("GiB per part on the GPU that decides: " + " · ".join(
    f"{name} {value}" for name, value in memory_parts(breakdown, plan).items()))
if shape.scheduler.num_blocks is not None:
    source = f"the {pool} pool's num_blocks" if pool else "scheduler.num_blocks"
    st.info(f"{source} = {shape.scheduler.num_blocks:,} overrides the planner's "
            f"{plan.num_blocks:,} blocks in the simulation.", icon=":material/info:")
with st.expander("How the planners count"):
    st.markdown(planners.__doc__)
