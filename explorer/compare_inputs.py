"""The Compare page's scenario editors: the current scenario is A; B.. are edits of it.

Each variant keeps only the fields the user changed, as values of the Compare page
(`explorer.widgets.page_value`: key `cmp_<variant>:<path>`, kept across page switches); the
others follow the current scenario, so turning a sidebar knob moves every variant with it.
"""

from __future__ import annotations

import typing

import streamlit as st

from explorer.bind import field_info
from explorer.state import get_path, implied_changes, web_config, with_path
from explorer.widgets import keep, kept, page_value
from sim_core import SimCoreError
from sim_core.results.compare import describe_changes

PAGE = "cmp"
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
    _first_edits(base, count)
    for index, column in enumerate(st.columns(count - 1), start=1):
        with column:
            st.markdown(f"**{chr(65 + index)}**")
            for path, label in FIELDS:
                _field(base, index, path, label)
    return [variant_edits(index) for index in range(1, count)]


def _first_edits(base: dict, count: int) -> None:
    """A variant's first edits (`default_edits`) are set once, when it first appears."""
    made = kept(PAGE).get("variants", 0)
    for index in range(made + 1, count):
        for path, value in default_edits(base, index).items():
            keep(PAGE, f"{index}:{path}", value)
    keep(PAGE, "variants", max(made, count - 1))


def variant_edits(index: int) -> dict:
    """{dotted path: value} of the fields variant `index` (1 = B) changes."""
    prefix = f"{index}:"
    return {name[len(prefix):]: value for name, value in kept(PAGE).items() if name.startswith(prefix)}


def _field(base: dict, index: int, path: str, label: str) -> None:
    info = field_info(path)
    common = {"help": info.description, **page_value(PAGE, f"{index}:{path}", get_path(base, path, info.default))}
    if typing.get_origin(info.annotation) is typing.Literal:
        st.selectbox(label, typing.get_args(info.annotation), **common)
    elif path.endswith(("tensor_parallel_size", "pipeline_parallel_size")):
        st.selectbox(label, sorted({*DEGREES, st.session_state[common["key"]]}), **common)
    else:
        st.number_input(label, min_value=1, step=1 if path.endswith("replicas") else 64, **common)


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
