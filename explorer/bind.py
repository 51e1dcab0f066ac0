"""The Scenario form: widgets for scenario fields, built from the pydantic schema.

Each widget is bound to its field (`explorer.widgets.scenario_field`: key `w:<place>:<dotted
path>`, mirrors the scenario, an edit that does not validate is explained and undone). Help text
is the field's own description, ranges come from its constraints.
"""

from __future__ import annotations

import types
import typing

import annotated_types
import streamlit as st
from pydantic import BaseModel

from explorer.state import get_path, scenario
from explorer.widgets import scenario_field
from sim_core.config import SimulationConfig
from sim_core.config.choices import choices_of, section_fields
from sim_core.schedulers import scheduler_label

# choices whose long description goes in a caption under the select box (a select box cuts long options)
OPTION_NOTES = {"scheduler.type": scheduler_label}


def _default(info):
    """A field's default (its default_factory called when it has one)."""
    return info.get_default(call_default_factory=True)


def _shown(value):
    """A list field as the text its widget shows."""
    return ", ".join(f"{v:g}" for v in value) if isinstance(value, list) else value


def field_info(path: str):
    """The pydantic FieldInfo of a dotted scenario path (a knob of a section with choices: any
    choice's; its discriminator: one field offering every choice)."""
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


def _numbers(text: str) -> list[float]:
    """A list field's text as its numbers."""
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError("expected numbers separated by commas") from None


def _same(value):
    return value


def _optional(number):
    """`number`, letting an empty widget (None) through."""
    return lambda v: None if v is None else number(v)


def bound(path: str, place: str = "form", label: str | None = None, options: list | None = None,
          kind: str | None = None, fmt: str | None = None, low=None, high=None, step=None):
    """Render the widget for the scenario field at `path`; returns its current value.

    `place` keeps widgets of the same field on different parts of the screen apart; `options`
    turns it into a select box; `kind="slider"` with `low`/`high` narrows the field's range;
    `step`: a number box's +/- step."""
    info = field_info(path)
    annotation, optional = _unwrap_optional(info.annotation)
    current = get_path(scenario(), path, _default(info))
    if annotation is float and current is not None:
        current = float(current)
    label = label or path.split(".")[-1].replace("_", " ")

    def field(parse=_same, show=_same) -> dict:
        return {"help": info.description, **scenario_field(path, place, show, parse, _default(info))}
    choices = options or (list(typing.get_args(annotation))
                          if typing.get_origin(annotation) is typing.Literal else None)
    if choices is not None and current not in choices:
        choices = [*choices, current]
    if choices is not None:
        chosen = st.selectbox(label, choices, **field())
        if path in OPTION_NOTES:
            st.caption(OPTION_NOTES[path](chosen))
        return chosen
    if annotation is bool:
        return st.toggle(label, **field(bool))
    if typing.get_origin(annotation) is list:
        return st.text_input(label, **field(_numbers, _shown))
    if annotation is str:
        return st.text_input(label, **field(lambda v: v or None))
    field_low, field_high = _bounds(info)
    low, high = (field_low if low is None else low), (field_high if high is None else high)
    number = int if annotation is int else float
    shown = _optional(float) if number is float else _same
    common = field(_optional(number) if optional else number, shown)
    if kind == "slider":
        low, high = min(low, current), max(high, current)
        return st.slider(label, min_value=number(low), max_value=number(high), **common)
    step = number(step) if step is not None else (1 if number is int else None)
    if fmt is None and number is float:
        fmt = "%.6f" if current is not None and 0 < abs(current) < 0.01 else "%.3f"
    return st.number_input(label, min_value=number(low) if low is not None else None,
                           max_value=number(high) if high is not None else None, step=step, format=fmt, **common)


def section(prefix: str, names: list[str] | None = None, place: str = "form", columns: int = 3) -> None:
    """Bound widgets for the scalar fields of one config section (`names`, default: all); for a
    section with choices, those of its current choice's model (e.g. the current policy's knobs)."""
    model = _model_of(field_info(prefix).annotation)
    choices = choices_of(model)
    if choices is not None:
        model = choices.member((get_path(scenario(), prefix, {}) or {}).get(choices.key))
    names = names or [n for n, f in model.model_fields.items() if _model_of(f.annotation) is None]
    shown = [n for n in names if n in model.model_fields]
    slots = st.columns(columns)
    for i, name in enumerate(shown):
        with slots[i % columns]:
            bound(f"{prefix}.{name}", place)
