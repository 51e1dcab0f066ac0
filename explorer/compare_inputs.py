"""The Compare page's scenario editors: the current scenario is A; B.. are edits of it.

Each variant keeps only the fields the user changed (`st.session_state[EDITS_KEY]`, a plain
list of dicts that survives page switches); the others follow the current scenario, so turning a
sidebar knob moves every variant with it.
"""

from __future__ import annotations

import typing

import streamlit as st

from explorer.bind import field_info, implied_changes
from explorer.state import get_path, scenario_json, web_config, with_path
from sim_core import SimCoreError
from sim_core.results.compare import describe_changes

EDITS_KEY, BASE_KEY, PREFIX = "compare_edits", "compare_base", "cmp:"
FIELDS = (("scheduler.type", "Scheduler"), ("scheduler.chunk_size", "Chunk size"),
          ("cluster.tensor_parallel_size", "TP"), ("cluster.pipeline_parallel_size", "PP"),
          ("cluster.num_replicas", "Replicas"), ("cluster.global_scheduler", "Router"))
DEGREES = [1, 2, 4, 8]


def default_edits(base: dict, index: int) -> dict:
    """What variant `index` (1 = B) changes at first: another scheduler, twice the replicas, TP x 2..."""
    other = "sarathi" if get_path(base, "scheduler.type", "vllm") != "sarathi" else "vllm"
    replicas, tp = get_path(base, "cluster.num_replicas", 1), get_path(base, "cluster.tensor_parallel_size", 1)
    choices = [{"scheduler.type": other}, {"cluster.num_replicas": replicas * 2},
               {"cluster.tensor_parallel_size": min(tp * 2, 8)},
               {"scheduler.type": "sarathi", "scheduler.chunk_size": 256},    # chunk_size is sarathi's
               {"cluster.global_scheduler": "lor"}]
    return dict(choices[(index - 1) % len(choices)])


def variant_editors(base: dict, count: int) -> list[dict]:
    """Draw one column of widgets per variant (B..); return each variant's edits."""
    edits = st.session_state.setdefault(EDITS_KEY, [])
    while len(edits) < count - 1:
        edits.append(default_edits(base, len(edits) + 1))
    if st.session_state.get(BASE_KEY) != scenario_json(base):     # the base moved: widgets re-read it
        st.session_state[BASE_KEY] = scenario_json(base)
        for key in [k for k in st.session_state if isinstance(k, str) and k.startswith(PREFIX)]:
            del st.session_state[key]
    for index, column in enumerate(st.columns(count - 1), start=1):
        with column:
            st.markdown(f"**{chr(65 + index)}**")
            for path, label in FIELDS:
                _field(base, edits[index - 1], index, path, label)
    return edits[:count - 1]


def _field(base: dict, edits: dict, index: int, path: str, label: str) -> None:
    key = f"{PREFIX}{index}:{path}"
    if key not in st.session_state:
        st.session_state[key] = edits.get(path, get_path(base, path, field_info(path).default))
    common = {"key": key, "on_change": _save, "args": (base, edits, key, path), "help": field_info(path).description}
    annotation = field_info(path).annotation
    if typing.get_origin(annotation) is typing.Literal:
        st.selectbox(label, typing.get_args(annotation), **common)
    elif path.endswith(("tensor_parallel_size", "pipeline_parallel_size")):
        st.selectbox(label, sorted({*DEGREES, st.session_state[key]}), **common)
    else:
        st.number_input(label, min_value=1, step=1 if path.endswith("replicas") else 64, **common)


def _save(base: dict, edits: dict, key: str, path: str) -> None:
    value = st.session_state[key]
    if value == get_path(base, path, field_info(path).default):
        edits.pop(path, None)
    else:
        edits[path] = value


def variant_scenarios(base: dict, edits: list[dict]) -> tuple[dict[str, dict], list[str]]:
    """({label: scenario} for A and every valid variant, [why a variant was left out])."""
    named, problems = {f"A: {get_path(base, 'scheduler.type', 'vllm')} (current)": base}, []
    for index, changes in enumerate(edits, start=1):
        candidate = base
        for path, value in changes.items():
            implied = implied_changes(path, value, candidate)
            candidate = with_path(candidate, path, value)
            for other, other_value in implied.items():
                if other not in changes:
                    candidate = with_path(candidate, other, other_value)
        letter = chr(65 + index)
        try:
            web_config(candidate)
        except SimCoreError as error:
            problems.append(f"{letter} is not run: {error}")
            continue
        named[f"{letter}: {describe_changes(base, candidate)}"] = candidate
    return named, problems
