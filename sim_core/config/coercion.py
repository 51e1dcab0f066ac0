"""No silent coercion: pydantic's lax mode reads True as 1, "42" as 42 and "yes" as True.

Before a scenario is validated, every value meant for a number must be a number (not a
boolean, not a string) and every value meant for a boolean must be a boolean, at any depth
(sections, lists, the `models` and `devices` catalogs). A whole float for an integer stays
accepted (2.0 -> 2: JSON writers and number widgets produce those); a fractional one is
refused by pydantic itself, as are NaN and infinity (`allow_inf_nan=False`).
"""

from __future__ import annotations

import types
import typing

import numpy as np
from pydantic import BaseModel

from sim_core.config.choices import choices_of, section_fields
from sim_core.config.errors import allowed_range
from sim_core.errors import shown

NOT_NUMBERS = (bool, np.bool_, str, bytes)
# what _first_problem checks a value against: int, float, bool, a model class,
# ("list" | "dict", item kind), or None (not checked)
Kind: typing.TypeAlias = "type | tuple[str, Kind] | None"

EXPECTED: dict[Kind, str] = {int: "Input should be a valid integer", float: "Input should be a valid number",
            bool: "Input should be a valid boolean"}


def refuse_coercion(root: type[BaseModel], data: object) -> None:
    """Raise ValueError naming the first value whose type pydantic would coerce.

    The message reads like the other validation errors: 'path: got VALUE; allowed RANGE; Input
    should be a valid integer'. Unknown keys and other types are left to pydantic.
    """
    problem = _first_problem(root, data, ())
    if problem is not None:
        loc, value, kind = problem
        range_text = allowed_range(root, loc)
        parts = [f"{'.'.join(map(str, loc))}: got {shown(value, 60)}", *([f"allowed {range_text}"] if range_text
                                                                         else []), EXPECTED[kind]]
        raise ValueError("; ".join(parts))


def _first_problem(kind: Kind, value: object, loc: tuple) -> tuple[tuple, object, Kind] | None:
    if kind in (int, float):
        return (loc, value, kind) if isinstance(value, NOT_NUMBERS) else None
    if kind is bool:
        return None if value is None or isinstance(value, (bool, np.bool_)) else (loc, value, kind)
    if isinstance(kind, tuple) and isinstance(value, (list, dict)):   # ("list" | "dict", item kind)
        items = enumerate(value) if kind[0] == "list" and isinstance(value, list) else \
            value.items() if kind[0] == "dict" and isinstance(value, dict) else ()
        return next(filter(None, (_first_problem(kind[1], item, (*loc, key)) for key, item in items)), None)
    if isinstance(kind, type) and issubclass(kind, BaseModel) and isinstance(value, dict):
        # a section with choices: its choice's knobs, and another choice's knobs as that one declares them
        choices = choices_of(kind)
        member = choices.member(value.get(choices.key)) if choices is not None else None
        fields = {**section_fields(kind), **(member.model_fields if member is not None else {})}
        return next(filter(None, (_first_problem(_kind(fields[key].annotation), item, (*loc, key))
                                  for key, item in value.items() if key in fields)), None)
    return None


def _kind(annotation: object) -> Kind:
    """int, float, bool, a model class, ("list" | "dict", item kind), or None (not checked)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _kind(inner[0]) if len(inner) == 1 else None
    if origin is list:
        return ("list", _kind(args[0]))
    if origin is dict:
        return ("dict", _kind(args[1]))
    if annotation in (int, float, bool) or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return annotation
    return None
