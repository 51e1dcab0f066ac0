"""Turn pydantic validation errors into one line naming field, value and allowed range."""

from __future__ import annotations

import typing

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from sim_core.config.choices import choices_of, section_fields
from sim_core.errors import MAX_SHOWN, clipped, shown

MAX_PROBLEMS = 10   # a list of 10,000 NaNs is one line, not 10,000 problems


def describe_validation_error(exc: ValidationError, root: type[BaseModel]) -> str:
    """One line per problem, joined by '; ': `field: got VALUE; allowed RANGE (reason)`; at most
    MAX_PROBLEMS of them, every echoed value and key cut short (`sim_core.errors.shown`)."""
    errors = exc.errors(include_url=False, include_context=False)
    text = "; ".join(_describe_one(err, root) for err in errors[:MAX_PROBLEMS])
    if len(errors) > MAX_PROBLEMS:
        text += f"; and {len(errors) - MAX_PROBLEMS} more problem(s)"
    return text


def _describe_one(err: ErrorDetails, root: type[BaseModel]) -> str:
    if err["type"] == "union_tag_invalid":     # a section with choices names none of them
        key = _choices_key(root, err["loc"])
        err = {**err, "loc": (*err["loc"], key), "type": "literal_error", "input": _tag_of(err.get("input"), key)}
    loc = ".".join(clipped(str(part), 60) for part in error_location(root, err))
    message = clipped(err["msg"].removeprefix("Value error, "), 2 * MAX_SHOWN)
    if err["type"] == "value_error" and not loc:
        return message
    allowed = allowed_range(root, err["loc"])
    parts = [f"{loc or 'scenario'}: got {_short(err.get('input'))}"]
    if allowed:
        parts.append(f"allowed {allowed}")
    if err["type"] == "extra_forbidden":
        foreign = _knob_of_another_choice(err, root)
        if foreign:
            return foreign
        parts = [f"{loc}: unknown key"]
        known = _known_keys(root, err["loc"][:-1])
        if known:
            parts.append(f"known keys: {', '.join(known)}")
    elif not allowed or err["type"] not in ("greater_than_equal", "less_than_equal", "greater_than",
                                            "less_than", "literal_error"):
        parts.append(message)
    return "; ".join(parts)


def _short(value: object) -> str:
    return shown(value, 60)


def _tag_of(section: object, key: str) -> object:
    return section.get(key) if isinstance(section, dict) else section


def _choices_key(root: type[BaseModel], loc: tuple) -> str:
    choices = choices_of(_walk(root, loc)[1])
    return choices.key if choices is not None else "type"


def _walk(root: type[BaseModel], loc: tuple) -> tuple[FieldInfo | None, type[BaseModel] | None]:
    """(field at `loc`, its section model) walking `root`; in a section with choices a loc part
    that names a choice (pydantic's union tag) selects that choice's model."""
    model: type[BaseModel] | None = root
    field = None
    for part in loc:
        choices = choices_of(model)
        if choices is not None and part in choices.members():
            model = choices.members()[part]
            continue
        fields = section_fields(model) if isinstance(model, type) and issubclass(model, BaseModel) else {}
        if part not in fields:
            return None, None
        field = fields[part]
        model = _model_of(field.annotation)
    return field, model


def _field_at(root: type[BaseModel], loc: tuple) -> FieldInfo | None:
    return _walk(root, loc)[0]


def error_location(root: type[BaseModel], err: ErrorDetails) -> tuple:
    """The field an error is about, as the scenario spells it: without the union tag (a choice,
    such as a policy name) pydantic inserts after a section with choices; an unknown choice is
    an error of the section's discriminator (`scheduler.type`)."""
    loc = err["loc"]
    if err["type"] == "union_tag_invalid":
        loc = (*loc, _choices_key(root, loc))
    return tuple(part for index, part in enumerate(loc) if not _is_tag(root, loc[:index], part))


def _is_tag(root: type[BaseModel], before: tuple, part: object) -> bool:
    choices = choices_of(_walk(root, before)[1])
    return choices is not None and part in choices.members()


def _knob_of_another_choice(err: ErrorDetails, root: type[BaseModel]) -> str:
    """For a knob of another choice of its section: the value's own problem when it has one (as
    that choice sees it), else which choice does not read it and which do; '' for any other key."""
    loc = err["loc"]
    choices = choices_of(_walk(root, loc[:-2])[1]) if len(loc) >= 3 else None
    if choices is None or loc[-2] not in choices.members():
        return ""
    knob = str(loc[-1])
    readers = choices.readers(knob)
    if not readers:
        return ""
    try:
        choices.members()[readers[0]].model_validate({knob: err.get("input")})
    except ValidationError as exc:
        own = [e for e in exc.errors(include_url=False, include_context=False) if e["loc"][:1] == (knob,)]
        if own:   # (not the member's rules between knobs: the others are absent here)
            return _describe_one({**own[0], "loc": (*loc[:-2], readers[0], *own[0]["loc"])}, root)
    shown_loc = ".".join(clipped(str(part), 60) for part in (*loc[:-2], knob))
    return f"{shown_loc}: got {_short(err.get('input'))}; {loc[-2]} does not read it (read by: {', '.join(readers)})"


def _model_of(annotation: object) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _known_keys(root: type[BaseModel], loc: tuple) -> list[str]:
    if not loc:
        return list(root.model_fields)
    model = _walk(root, loc)[1]
    return list(model.model_fields) if model else []


def allowed_range(root: type[BaseModel], loc: tuple) -> str:
    """'one of: a, b' or 'range LOW .. HIGH' for the field at `loc` of `root` ('' if unknown)."""
    field = _field_at(root, loc)
    if field is None:
        return ""
    choices = _literal_choices(field.annotation)
    if choices:
        return "one of: " + ", ".join(map(str, choices))
    low = high = None
    for item in field.metadata:
        if isinstance(item, (Ge, Gt)):
            low = f"{item.ge if isinstance(item, Ge) else item.gt}{'' if isinstance(item, Ge) else ' (exclusive)'}"
        if isinstance(item, (Le, Lt)):
            high = f"{item.le if isinstance(item, Le) else item.lt}{'' if isinstance(item, Le) else ' (exclusive)'}"
    if low is None and high is None:
        return ""
    return f"range {low if low is not None else '-inf'} .. {high if high is not None else 'inf'}"


def _literal_choices(annotation: object) -> tuple:
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is typing.Literal:
            return typing.get_args(arg)
    return ()
