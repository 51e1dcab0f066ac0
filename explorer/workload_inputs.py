"""Widgets of the Workload page's generator (help texts come from the config's descriptions)."""

from __future__ import annotations

import streamlit as st

from sim_core.config import ArrivalConfig, LengthConfig, SessionConfig, WorkloadConfig
from sim_core.config.generators import SharedPrefixConfig

PROCESSES = ["poisson", "gamma", "static", "bursty", "diurnal"]
DISTRIBUTIONS = ["uniform", "fixed", "zipf", "lognormal"]
WL, AR, LN, SE = (c.model_fields for c in (WorkloadConfig, ArrivalConfig, LengthConfig, SessionConfig))
SP = SharedPrefixConfig.model_fields


def generator_spec(trace: str | None) -> dict:
    """The workload section the generator widgets describe; `trace` (the last uploaded file, if
    any) enables replaying its arrivals and resampling its lengths (empirical)."""
    cols = st.columns(4)
    processes = PROCESSES + (["replay"] if trace else [])
    process = cols[0].selectbox("Arrival process", processes, key="wl_process", help=AR["process"].description)
    qps = cols[1].number_input("Rate (req/s)", 0.1, 10_000.0, 4.0, key="wl_qps", help=AR["qps"].description)
    cv = cols[2].number_input("Gamma CV", 0.1, 100.0, 2.0, key="wl_cv", help=AR["cv"].description)
    count = cols[3].number_input("Requests", 1, 1_000_000, 500, key="wl_count", help=WL["num_requests"].description)
    left, right = st.columns(2)
    with left:
        prompt = lengths("Prompt", 64, 1024, "prompt", trace)
    with right:
        output = lengths("Output", 16, 512, "output", trace)
    spec = {"num_requests": int(count), "arrival": {"process": process, "qps": qps, "cv": cv},
            "prompt_tokens": prompt, "output_tokens": output}
    if process == "replay":
        spec["arrival"]["trace_file"] = trace
    if st.toggle("Multi-turn sessions", key="wl_sessions", help=SE["enabled"].description):
        cols = st.columns(3)
        turns = cols[0].slider("Turns", 1, 20, (1, 6), key="wl_turns", help=SE["max_turns"].description)
        think = cols[1].number_input("Think time (s)", 0.0, 600.0, 5.0, key="wl_think",
                                     help=SE["think_time_s"].description)
        system = cols[2].number_input("System prompt tokens", 0, 32_768, 0, key="wl_system",
                                      help=SE["system_prompt_tokens"].description)
        spec["sessions"] = {"enabled": True, "min_turns": turns[0], "max_turns": turns[1],
                            "think_time_s": think, "system_prompt_tokens": int(system)}
    elif st.toggle("Shared system prompts", key="wl_shared", help=SP["tokens"].description):
        cols = st.columns(2)
        tokens = cols[0].number_input("Prefix tokens", 1, 65_536, 512, key="wl_prefix_tokens",
                                      help=SP["tokens"].description)
        groups = cols[1].number_input("Distinct prefixes", 1, 10_000, 4, key="wl_prefix_groups",
                                      help=SP["num_groups"].description)
        spec["shared_prefix"] = {"tokens": int(tokens), "num_groups": int(groups)}
    return spec


def lengths(label: str, low: int, high: int, key: str, trace: str | None) -> dict:
    kinds = DISTRIBUTIONS + (["empirical"] if trace else [])
    kind = st.selectbox(f"{label} distribution", kinds, key=f"wl_{key}_dist", help=LN["distribution"].description)
    if kind == "empirical":
        st.caption(f"{label} lengths resampled from the uploaded trace (histogram below).")
        return {"distribution": "empirical", "trace_file": trace}
    low, high = st.slider(f"{label} tokens (min, max)", 1, 16384, (low, high), key=f"wl_{key}_range",
                          help=LN["min"].description)
    typical = st.number_input(f"{label}: fixed value / lognormal mean", 1, 16384, 256, key=f"wl_{key}_typical",
                              help=LN["mean"].description)
    return {"distribution": kind, "min": low, "max": high, "value": typical, "mean": float(typical)}
