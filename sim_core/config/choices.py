"""Sections whose discriminator picks a config model: one member model per choice.

A section with choices (`scheduler` and `predictor` by `type`, `memory` by `planner`,
`workload.arrival` by `process`, the length distributions by `distribution`) has a base model, a
subclass of `ChoiceBase` holding the discriminator and the knobs every choice reads, and one
member per choice: a subclass whose discriminator is `Literal["<choice>"]` and which adds only
the knobs that choice reads. The scenario annotates the section `Annotated[Base, BY_CHOICE]` and
validates it as the member its discriminator names (absent: the default), so a consumer reads a
knob from the member that has it.

A knob of another choice is left out when it holds that choice's default (older scenario files
and links spelled out every knob of every choice); any other value is an error naming the
choices that read it (`errors.py`). Switching the discriminator keeps the knobs the new choice
reads and leaves out the others (`Choices.switched`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Union

from pydantic import BaseModel, Discriminator, GetCoreSchemaHandler, Tag, model_validator
from pydantic.errors import PydanticUndefinedAnnotation
from pydantic.fields import FieldInfo
from pydantic_core import CoreSchema


class Choices:
    """The choices of one section: its base model, its discriminator and one member per choice."""

    def __init__(self, base: type[BaseModel], key: str, members: Mapping[str, type[BaseModel]] | None = None) -> None:
        self.base, self.key, self._members = base, key, dict(members or {})

    def members(self) -> Mapping[str, type[BaseModel]]:
        """Choice -> member model, in the order the choices are listed."""
        return self._members

    def default(self) -> str:
        """The choice of a section that names none."""
        return str(self.base.model_fields[self.key].default)

    def key_field(self) -> FieldInfo:
        """The discriminator as one field offering every choice (forms, errors, sweeps)."""
        return self.base.model_fields[self.key]

    def member(self, name: object) -> type[BaseModel] | None:
        """The member model of choice `name` (the default's for None; None if unknown)."""
        return self.members().get(self.default() if name is None else str(name))

    def fields(self) -> dict[str, FieldInfo]:
        """Every knob of every choice, first declaration wins; the discriminator offers every choice."""
        fields: dict[str, FieldInfo] = {}
        for model in self.members().values():
            for name, info in model.model_fields.items():
                fields.setdefault(name, info)
        return {**fields, self.key: self.key_field()}

    def readers(self, knob: str) -> list[str]:
        """The choices whose member has `knob`, in order."""
        return [name for name, model in self.members().items() if knob in model.model_fields]

    def knob_default(self, knob: str) -> object:
        """The default of `knob` in the first member that has it (a unique object when none has
        it, so that it equals no value)."""
        for model in self.members().values():
            info = model.model_fields.get(knob)
            if info is not None:
                return info.get_default(call_default_factory=True)
        return _NO_DEFAULT

    def switched(self, section: dict, name: str) -> dict:
        """A section (a dict) switched to choice `name`: the knobs `name` does not read are left
        out, the others (the shared ones included) keep their values."""
        model = self.member(name)
        kept = {key: value for key, value in section.items() if model is None or key in model.model_fields}
        return {**kept, self.key: name}

    def switch(self, scenario: dict, path: str, name: str) -> dict[str, object]:
        """What switching the section at dotted `path` of a scenario (a dict) to `name` changes
        besides the discriminator: dotted path -> new value, None for a knob to leave out."""
        section = _get(scenario, path)
        model = self.member(name)
        if model is None:
            return {}
        return {f"{path}.{key}": None for key in section if key not in model.model_fields}

    def tag(self, value: Any) -> str:
        """The choice a section (a dict or a member) names; pydantic's discriminator."""
        if isinstance(value, dict):
            return str(value.get(self.key, self.default()))
        return str(getattr(value, self.key, self.default()))

    def schema(self, handler: GetCoreSchemaHandler) -> CoreSchema:
        """The section's schema: the member its discriminator names."""
        if not self.members():   # the scheduler section waits for sim_core.schedulers to register
            raise PydanticUndefinedAnnotation(self.base.__name__, f"{self.base.__name__} has no choices yet")
        members = tuple(Annotated[model, Tag(name)] for name, model in self.members().items())
        return handler.generate_schema(Annotated[Union[members], Discriminator(self.tag)])   # noqa: UP007


_NO_DEFAULT = object()
_CHOICES: dict[type[BaseModel], Choices] = {}   # base model -> its choices


def add_choices(choices: Choices) -> None:
    """Make `choices.base` a section with choices (`BY_CHOICE` then validates it by member)."""
    _CHOICES[choices.base] = choices


def choices_of(model: object) -> Choices | None:
    """The choices of a section's base model (None for a plain section, a member or a non-model)."""
    return _CHOICES.get(model) if isinstance(model, type) else None


def section_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """The fields a section accepts: for a section with choices, every choice's knobs; else the
    model's own."""
    choices = choices_of(model)
    return choices.fields() if choices is not None else dict(model.model_fields)


def choices_at(path: str) -> Choices | None:
    """The choices of the scenario section at dotted `path` (None: no such section with choices)."""
    from sim_core.config.simulation import SimulationConfig  # the scenario holds the sections

    model: object = SimulationConfig
    for part in path.split(".") if path else ():
        fields = section_fields(model) if isinstance(model, type) and issubclass(model, BaseModel) else {}
        if part not in fields:
            return None
        model = fields[part].annotation
    return choices_of(model)


def discriminator_of(path: str) -> tuple[str, Choices] | None:
    """(section path, its choices) when dotted `path` is the discriminator of a section with
    choices ("predictor.type" -> ("predictor", ...)); else None."""
    section, _, last = path.rpartition(".")
    choices = choices_at(section) if section else None
    return (section, choices) if choices is not None and last == choices.key else None


def switch_changes(scenario: dict, path: str, value: object) -> dict[str, object]:
    """What setting the scenario field at `path` to `value` changes besides it: for a
    discriminator, the knobs the new choice does not read (None: left out) and what the choice
    implies; else nothing."""
    found = discriminator_of(path)
    if found is None or not isinstance(value, str):
        return {}
    section, choices = found
    return choices.switch(scenario, section, value)


def with_choice(scenario: dict, path: str, value: object) -> dict:
    """A copy of the nested dict `scenario` with `value` at dotted `path`; a new choice of a
    discriminator leaves out the knobs it does not read (the others keep their values)."""
    found = discriminator_of(path)
    if found is not None and isinstance(value, str):
        section, choices = found
        return _put(scenario, section, choices.switched(_get(scenario, section), value))
    return _put(scenario, path, value)


def read_by(scenario: dict, path: str) -> dict:
    """`scenario`, switched to the first choice that reads the knob at `path` when its section's
    current choice does not (so that a value of that knob can be checked on its own)."""
    section, _, knob = path.rpartition(".")
    choices = choices_at(section) if section else None
    if choices is None or knob == choices.key:
        return scenario
    current = choices.member(_get(scenario, section).get(choices.key))
    readers = choices.readers(knob)
    if not readers or (current is not None and knob in current.model_fields):
        return scenario
    return with_choice(scenario, f"{section}.{choices.key}", readers[0])


def _get(data: dict, path: str) -> dict:
    """The mapping at dotted `path` of nested dicts ({} when absent or not a mapping)."""
    node: object = data
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def _put(data: dict, path: str, value: object) -> dict:
    """A copy of nested dict `data` with `value` at dotted `path` (copies along the path only)."""
    head, _, rest = path.partition(".")
    inner = data.get(head)
    return {**data, head: _put(inner if isinstance(inner, dict) else {}, rest, value) if rest else value}


def _same(value: object, default: object) -> bool:
    """`value` is `default` as a scenario spells it (2.0 for 2; never True for 1)."""
    return value == default and isinstance(value, bool) == isinstance(default, bool)


class _ByChoice:
    """Marker on a section field (`Annotated[Base, BY_CHOICE]`): validate the section as the
    member its discriminator names."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return _CHOICES[source].schema(handler)


BY_CHOICE = _ByChoice()


class ChoiceBase(BaseModel):
    """Base of a section with choices (see the module doc): a member leaves out another
    choice's knob at that choice's default before it validates."""

    @model_validator(mode="before")
    @classmethod
    def _leave_out_others_defaults(cls, data: object) -> object:
        """A knob of another choice at that choice's default is left out: full dumps (older
        scenario files held every choice's knobs) and templates shared by several choices stay
        valid. Any other value of it stays, and is an error naming the choices that read it."""
        choices = _section_of(cls)
        if choices is None or cls is choices.base or not isinstance(data, dict):
            return data
        return {key: value for key, value in data.items()
                if key in cls.model_fields or not _same(value, choices.knob_default(key))}


def _section_of(member: type) -> Choices | None:
    return next((_CHOICES[base] for base in member.__mro__ if base in _CHOICES), None)
