"""Quick knobs in the sidebar of every page: change the scenario without leaving the view."""

from __future__ import annotations

import streamlit as st

from explorer.bind import bound
from explorer.capacity_hint import known_capacity, offered_rate
from explorer.safe_text import plain
from explorer.state import SELECTED_KEY, apply_edits, get_path, pending_seconds, scenario
from sim_core.catalog import DEVICES, MODELS
from sim_core.config.simulation import MAX_NAME_CHARS
from sim_core.viz.units import duration_text


def quick_knobs() -> None:
    """The knobs users turn most, bound to the same scenario as the Scenario page."""
    current = scenario()
    with st.sidebar:
        st.caption(plain(current.get("name") or "unnamed scenario", MAX_NAME_CHARS))
        waiting = pending_seconds()
        if waiting is not None:
            st.warning(f"Edited: the views show the scenario before your edits. Simulating the new one "
                       f"takes about {duration_text(waiting)}.", icon=":material/pending:")
            st.button("Apply", type="primary", key="side_apply", on_click=apply_edits, width="stretch")
        bound("model", "side", "Model", options=sorted({*MODELS, *current.get("models", {})}))
        bound("device", "side", "GPU", options=sorted({*DEVICES, *current.get("devices", {})}))
        bound("scheduler.type", "side", "Replica scheduler")
        bound("cluster.global_scheduler", "side", "Global router")
        if get_path(current, "disaggregation.enabled"):      # the pools replace the cluster's sizes
            for pool in ("prefill", "decode"):
                bound(f"disaggregation.{pool}.num_replicas", "side", f"{pool.title()} replicas", kind="slider",
                      low=1, high=16)
            st.caption("P/D pools: each pool's TP and PP are on the Scenario page.")
        else:
            left, right = st.columns(2)
            with left:
                bound("cluster.tensor_parallel_size", "side", "TP", options=[1, 2, 4, 8])
            with right:
                bound("cluster.pipeline_parallel_size", "side", "PP", options=[1, 2, 4, 8])
            bound("cluster.num_replicas", "side", "Replicas", kind="slider", low=1, high=16)
        if not get_path(current, "workload.trace_file"):
            # typed boxes, not sliders: a value is exact (7.9, 20,000) and each re-simulation waits
            # for Enter or a step (a slider re-simulated for every 0.01 req/s it passed)
            bound("workload.arrival.qps", "side", "Arrival rate (req/s)", low=0.25, high=64.0, step=0.25,
                  fmt="%.2f")
            bound("workload.num_requests", "side", "Requests", low=10, high=20000, step=100)
        known = known_capacity(current)
        if known is not None:
            offered = offered_rate(current)
            st.caption(f"Capacity of this configuration: {known.max_qps:.3g} req/s ({known.slo_text()})"
                       + (f"; {known.share_text(offered)}" if offered else ""))
        selected = st.session_state.get(SELECTED_KEY)
        if selected is not None:
            st.info(f"Selected request #{selected}", icon=":material/my_location:")
            st.button("Clear selection", on_click=lambda: st.session_state.pop(SELECTED_KEY, None))
