"""Widgets bound to scenario fields, built from the pydantic schema.

A bound widget's key is `w:<place>:<dotted path>`. It is initialised from the scenario when its
key is absent (first render, after a page switch, after the scenario was replaced) and writes
back through `on_change`; an edit that does not validate is reverted and explained. Help text
is the field's own description, ranges come from its constraints.
"""

from __future__ import annotations

import types
import typing

import annotated_types
import streamlit as st
from pydantic import BaseModel

from explorer.state import ERROR_KEY, WIDGET_PREFIX, get_path, scenario, try_scenario, with_path
from sim_core.config import SchedulerConfig, SimulationConfig
from sim_core.config.applicability import applies
from sim_core.config.policies import policy_config, policy_switch, section_fields
from sim_core.schedulers import scheduler_label

OPTION_LABELS = {"scheduler.type": scheduler_label}   # choices shown with what they mirror


def _default(info):
    """A field's default (its default_factory called when it has one)."""
    return info.get_default(call_default_factory=True)


def _shown(value):
    """A list field as the text its widget shows."""
    return ", ".join(f"{v:g}" for v in value) if isinstance(value, list) else value


def field_info(path: str):
    """The pydantic FieldInfo of a dotted scenario path (a scheduler knob: any policy's)."""
    model, info = SimulationConfig, None
    for part in path.split("."):
        info = section_fields(model)[part]
        model = _model_of(info.annotation)
    return info


def _model_of(annotation):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _unwrap_optional(annotation) -> tuple:
    """(inner type, whether None is allowed) of `X | None`."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return inner[0], True
    return annotation, False


def _bounds(info) -> tuple:
    low = high = None
    for item in info.metadata:
        if isinstance(item, (annotated_types.Ge, annotated_types.Gt)):
            low = getattr(item, "ge", None) if isinstance(item, annotated_types.Ge) else item.gt
        if isinstance(item, (annotated_types.Le, annotated_types.Lt)):
            high = getattr(item, "le", None) if isinstance(item, annotated_types.Le) else item.lt
    return low, high


def _commit(key: str, path: str, to_value) -> None:
    try:
        value = to_value(st.session_state[key])
    except ValueError:
        st.session_state[ERROR_KEY] = f"{path}: expected numbers separated by commas"
        st.session_state[key] = _shown(get_path(scenario(), path, _default(field_info(path))))
        return
    implied = implied_changes(path, value)
    candidate = with_path(scenario(), path, value)
    for other, other_value in implied.items():
        candidate = with_path(candidate, other, other_value)
    if not try_scenario(candidate):
        st.session_state[key] = _shown(get_path(scenario(), path, _default(field_info(path))))
    for other in [path, *implied]:     # other widgets of these fields re-read the scenario
        for stale in [k for k in st.session_state if isinstance(k, str) and k.startswith(WIDGET_PREFIX)
                      and k.endswith(":" + other) and k != key]:
            del st.session_state[stale]


def implied_changes(path: str, value, base: dict | None = None) -> dict:
    """Fields that must change with this one for the scenario (`base`, default: the current
    one) to stay valid; None removes a key (a knob the new policy does not read)."""
    if path == "scheduler.type":
        return policy_switch(scenario() if base is None else base, value)
    return {}


def bound(path: str, place: str = "form", label: str | None = None, options: list | None = None,
          kind: str | None = None, fmt: str | None = None, low=None, high=None):
    """Render the widget for the scenario field at `path`; returns its current value.

    `place` keeps widgets of the same field on different parts of the screen apart; `options`
    turns it into a select box; `kind="slider"` with `low`/`high` narrows the field's range."""
    info = field_info(path)
    key = f"{WIDGET_PREFIX}{place}:{path}"
    annotation, optional = _unwrap_optional(info.annotation)
    current = get_path(scenario(), path, _default(info))
    if annotation is float and current is not None:
        current = float(current)
    if key not in st.session_state:
        st.session_state[key] = current
    label = label or path.split(".")[-1].replace("_", " ")
    common = {"key": key, "help": info.description, "on_change": _commit}
    choices = options or (list(typing.get_args(annotation))
                          if typing.get_origin(annotation) is typing.Literal else None)
    if choices is not None and current not in choices:
        choices = [*choices, current]
    if choices is not None:
        common["args"] = (key, path, lambda v: v)
        return st.selectbox(label, choices, format_func=OPTION_LABELS.get(path, str), **common)
    if annotation is bool:
        common["args"] = (key, path, bool)
        return st.toggle(label, **common)
    if typing.get_origin(annotation) is list:
        if isinstance(st.session_state[key], list):
            st.session_state[key] = _shown(st.session_state[key])
        common["args"] = (key, path, lambda v: [float(x) for x in v.split(",") if x.strip()])
        return st.text_input(label, **common)
    if annotation is str:
        common["args"] = (key, path, lambda v: v or None)
        return st.text_input(label, **common)
    field_low, field_high = _bounds(info)
    low, high = (field_low if low is None else low), (field_high if high is None else high)
    number = int if annotation is int else float
    common["args"] = (key, path, (lambda v: None if v is None else number(v)) if optional else number)
    if kind == "slider":
        low, high = min(low, current), max(high, current)
        return st.slider(label, min_value=number(low), max_value=number(high), **common)
    step = 1 if number is int else None
    if fmt is None and number is float:
        fmt = "%.6f" if current is not None and 0 < abs(current) < 0.01 else "%.3f"
    return st.number_input(label, min_value=number(low) if low is not None else None,
                           max_value=number(high) if high is not None else None, step=step, format=fmt, **common)


def section(prefix: str, names: list[str] | None = None, place: str = "form", columns: int = 3) -> None:
    """Bound widgets for the scalar fields of one config section that apply to its current
    discriminator (the scheduler section: the knobs of its current policy's config model)."""
    model = _model_of(field_info(prefix).annotation)
    values = get_path(scenario(), prefix, {}) or {}
    if model is SchedulerConfig:
        model = policy_config(values.get("type"))
    names = names or [n for n, f in model.model_fields.items() if _model_of(f.annotation) is None]
    shown = [n for n in names if n in model.model_fields and applies(prefix, n, values)]
    slots = st.columns(columns)
    for i, name in enumerate(shown):
        with slots[i % columns]:
            bound(f"{prefix}.{name}", place)
