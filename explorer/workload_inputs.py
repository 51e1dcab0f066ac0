"""Widgets of the Workload page's generator (help texts come from the config's descriptions); their
values are kept across page switches (`explorer.widgets.page_value`, keys `wl_<name>`)."""

from __future__ import annotations

import streamlit as st

from explorer.widgets import page_value
from sim_core.config import SessionConfig, WorkloadConfig
from sim_core.config.arrival import ARRIVALS
from sim_core.config.generators import SharedPrefixConfig
from sim_core.config.lengths import LENGTHS

PROCESSES = ["poisson", "gamma", "constant", "static", "bursty", "diurnal"]
DISTRIBUTIONS = ["uniform", "fixed", "zipf", "lognormal"]
WL, SE = WorkloadConfig.model_fields, SessionConfig.model_fields
AR, LN = ARRIVALS.fields(), LENGTHS.fields()     # every choice's knobs
SP = SharedPrefixConfig.model_fields
PAGE = "wl"


def generator_spec(trace: str | None) -> dict:
    """The workload section the generator widgets describe; `trace` (the last uploaded file, if
    any) enables replaying its arrivals and resampling its lengths (empirical)."""
    cols = st.columns(4)
    processes = PROCESSES + (["replay"] if trace else [])
    process = cols[0].selectbox("Arrival process", processes, help=AR["process"].description,
                               **page_value(PAGE, "process", processes[0]))
    qps = cols[1].number_input("Rate (req/s)", 0.1, 10_000.0, help=AR["qps"].description,
                               **page_value(PAGE, "qps", 4.0))
    cv = cols[2].number_input("Gamma CV", 0.1, 100.0, help=AR["cv"].description, **page_value(PAGE, "cv", 2.0))
    count = cols[3].number_input("Requests", 1, 1_000_000, help=WL["num_requests"].description,
                                 **page_value(PAGE, "count", 500))
    left, right = st.columns(2)
    with left:
        prompt = lengths("Prompt", 64, 1024, "prompt", trace)
    with right:
        output = lengths("Output", 16, 512, "output", trace)
    arrival = ARRIVALS.switched({"qps": qps, "cv": cv, "trace_file": trace}, process)   # the knobs it reads
    spec = {"num_requests": int(count), "arrival": arrival, "prompt_tokens": prompt, "output_tokens": output}
    if st.toggle("Multi-turn sessions", help=SE["enabled"].description, **page_value(PAGE, "sessions", False)):
        cols = st.columns(3)
        turns = cols[0].slider("Turns", 1, 20, help=SE["max_turns"].description, **page_value(PAGE, "turns", (1, 6)))
        think = cols[1].number_input("Think time (s)", 0.0, 600.0, help=SE["think_time_s"].description,
                                     **page_value(PAGE, "think", 5.0))
        system = cols[2].number_input("System prompt tokens", 0, 32_768, help=SE["system_prompt_tokens"].description,
                                      **page_value(PAGE, "system", 0))
        spec["sessions"] = {"enabled": True, "min_turns": turns[0], "max_turns": turns[1],
                            "think_time_s": think, "system_prompt_tokens": int(system)}
    elif st.toggle("Shared system prompts", help=SP["tokens"].description, **page_value(PAGE, "shared", False)):
        cols = st.columns(2)
        tokens = cols[0].number_input("Prefix tokens", 1, 65_536, help=SP["tokens"].description,
                                      **page_value(PAGE, "prefix_tokens", 512))
        groups = cols[1].number_input("Distinct prefixes", 1, 10_000, help=SP["num_groups"].description,
                                      **page_value(PAGE, "prefix_groups", 4))
        spec["shared_prefix"] = {"tokens": int(tokens), "num_groups": int(groups)}
    return spec


def lengths(label: str, low: int, high: int, key: str, trace: str | None) -> dict:
    kinds = DISTRIBUTIONS + (["empirical"] if trace else [])
    kind = st.selectbox(f"{label} distribution", kinds, help=LN["distribution"].description,
                        **page_value(PAGE, f"{key}_dist", kinds[0]))
    if kind == "empirical":
        st.caption(f"{label} lengths resampled from the uploaded trace (histogram below).")
        return {"distribution": "empirical", "trace_file": trace}
    low, high = st.slider(f"{label} tokens (min, max)", 1, 16384, help=LN["min"].description,
                          **page_value(PAGE, f"{key}_range", (low, high)))
    typical = st.number_input(f"{label}: fixed value / lognormal mean", 1, 16384, help=LN["mean"].description,
                              **page_value(PAGE, f"{key}_typical", 256))
    return LENGTHS.switched({"min": low, "max": high, "value": typical, "mean": float(typical)}, kind)
