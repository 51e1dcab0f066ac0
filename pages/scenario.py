"""Scenario: every knob as a widget (help = the field's description), presets, files, traces."""

import streamlit as st

from explorer.bind import bound, section
from explorer.frame import through_app
from explorer.scenario_files import files_row, presets_row, trace_source
from explorer.state import get_path, scenario, try_scenario, with_path
from explorer.widgets import page_value
from sim_core.catalog import DEVICES, MODELS
from sim_core.config.policies import policy_config
from sim_core.config.sections import ClusterConfig

# MoE models only (docs/design/moe-parallelism.md), with their defaults
MOE_KNOBS = {"data_parallel_size": 1, "expert_parallel_size": 1, "all2all_backend": "allgather_reducescatter"}

through_app()

st.title("Scenario")
st.caption("Every change re-simulates; the URL always holds the scenario, so a link reproduces this view. "
           "Knobs that do not apply to the chosen policy are hidden.")
presets_row()
files_row()
current = scenario()
tabs = st.tabs(["Model & cluster", "Replica scheduler", "KV cache & memory", "Cost model", "Workload", "Engine"])
with tabs[0]:
    cols = st.columns(3)
    with cols[0]:
        bound("model", options=sorted({*MODELS, *current.get("models", {})}))
    with cols[1]:
        bound("device", options=sorted({*DEVICES, *current.get("devices", {})}))
    with cols[2]:
        bound("max_model_len")
    custom, spec = (current.get("models") or {}).get(get_path(current, "model")), MODELS.get(get_path(current, "model"))
    moe = (custom.get("num_experts") or 1) > 1 if isinstance(custom, dict) else spec is not None and spec.is_moe
    # shown for MoE models, and wherever set (so a dense model's leftover value can be reset)
    section("cluster", [n for n in ClusterConfig.model_fields if n not in MOE_KNOBS or moe
                        or get_path(current, f"cluster.{n}", MOE_KNOBS[n]) != MOE_KNOBS[n]])
    st.markdown("**P/D disaggregation** (prefill and decode pools replace the replicas above)")
    section("disaggregation", ["enabled", "link_bandwidth_gb_s", "link_latency_s"])
    if get_path(current, "disaggregation.enabled"):
        for pool in ("prefill", "decode"):
            st.markdown(f"*{pool.capitalize()} pool*")
            section(f"disaggregation.{pool}")
    cols = st.columns(3)
    with cols[0]:
        bound("seed")
    with cols[1]:
        bound("name")
with tabs[1]:
    knobs = policy_config(get_path(current, "scheduler.type")).model_fields   # the current policy's
    section("scheduler", [n for n in knobs if n != "num_blocks"])          # (KV blocks: next tab)
with tabs[2]:
    bound("scheduler.num_blocks", label="KV blocks per replica (empty: the planner decides)")
    section("memory")
    st.page_link("pages/memory.py", label="See the memory plan", icon=":material/memory:")
with tabs[3]:
    section("predictor")
with tabs[4]:
    trace = get_path(current, "workload.trace_file")
    source = st.radio("Requests from", ["synthetic generator", "trace file"], horizontal=True, **page_value(
        "sc", "source", "trace file" if trace else "synthetic generator", with_scenario=True))
    if source == "trace file":
        trace_source()
        section("workload", ["trace_format", "on_bad_rows", "drop_duplicates", "max_trace_requests",
                             "window_start_s", "window_end_s", "sample_fraction", "target_qps"], columns=4)
        st.markdown("**Sessions** (traces with a session_id column)")
        section("workload.sessions", ["closed_loop", "closed_loop_gap", "think_time_s"])
    else:
        if trace:
            try_scenario(with_path(current, "workload.trace_file", None))
            st.rerun()
        section("workload", ["num_requests", "seed", "parallel_samples"])
        for part, title in (("arrival", "Arrivals"), ("prompt_tokens", "Prompt lengths"),
                            ("output_tokens", "Output lengths"), ("sessions", "Multi-turn sessions"),
                            ("shared_prefix", "Shared prompt prefix")):
            st.markdown(f"**{title}**")
            section(f"workload.{part}", columns=4)
    st.markdown("**Scaling**")
    section("workload", ["time_scale_factor", "prefill_scale_factor", "decode_scale_factor"])
with tabs[5]:
    bound("engine.fast_forward")
    st.caption("Each page simulates the record level it shows (engine.record: the Overview `series`, the Pipeline "
               "`batches`, the KV cache and Requests pages `full`); the results are the same at every level.")
