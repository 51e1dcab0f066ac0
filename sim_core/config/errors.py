"""Turn pydantic validation errors into one line naming field, value and allowed range."""

from __future__ import annotations

import typing

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

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
    loc = ".".join(clipped(str(part), 60) for part in err["loc"])
    message = clipped(err["msg"].removeprefix("Value error, "), 2 * MAX_SHOWN)
    if err["type"] == "value_error" and not loc:
        return message
    allowed = allowed_range(root, err["loc"])
    parts = [f"{loc or 'scenario'}: got {_short(err.get('input'))}"]
    if allowed:
        parts.append(f"allowed {allowed}")
    if err["type"] == "extra_forbidden":
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


def _field_at(root: type[BaseModel], loc: tuple) -> FieldInfo | None:
    model: type[BaseModel] | None = root
    field = None
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return None
        field = model.model_fields[part]
        model = _model_of(field.annotation)
    return field


def _model_of(annotation: object) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _known_keys(root: type[BaseModel], loc: tuple) -> list[str]:
    if not loc:
        return list(root.model_fields)
    field = _field_at(root, loc)
    model = _model_of(field.annotation) if field else None
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
