"""The registered policies: the union `scheduler` validates against, and questions about it.

`sim_core.schedulers` calls `add_policies` with every policy's traits at import (its registry is
the tuple `POLICIES` there); that makes the policy's config model a member of the union the scenario
validates `scheduler` against, tagged by its `type` (absent: the first registered, vllm): the
scheduler section is a section with choices (`choices.py`) whose choices are the registered
policies. Every `import sim_core...` runs `sim_core/__init__.py`, which imports the schedulers, so
the union is complete before any scenario is validated.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from sim_core.config.choices import BY_CHOICE, Choices, add_choices
from sim_core.config.scheduler import PolicyTraits, SchedulerConfig

_REGISTERED: dict[str, PolicyTraits] = {}   # policy name -> traits, in registration order


def add_policies(*traits: PolicyTraits) -> None:
    """Make the policies choices of `scheduler.type` (replacing any of the same name) and rebuild
    the scenario model so that their config models validate."""
    for one in traits:
        _REGISTERED[one.name] = one
    _rebuild()


def remove_policy(name: str) -> None:
    """Undo `add_policies` for one policy (tests register toy policies and take them back)."""
    del _REGISTERED[name]
    _rebuild()


def _rebuild() -> None:
    from sim_core.config.simulation import SimulationConfig  # the model that holds the section

    SimulationConfig.model_rebuild(force=True)


def policy_names() -> tuple[str, ...]:
    """Every registered `scheduler.type`, in registration order."""
    return tuple(_REGISTERED)


def policy_traits(name: str) -> PolicyTraits:
    """The traits of a registered policy (KeyError for an unknown name)."""
    return _REGISTERED[name]


def default_policy() -> str:
    """The `scheduler.type` of a scenario that names none (the first registered policy)."""
    return next(iter(_REGISTERED))


def default_scheduler() -> SchedulerConfig:
    """The scheduler section of a scenario that has none: the default policy, its defaults."""
    return _REGISTERED[default_policy()].config.model_validate({})


class RegisteredPolicies(Choices):
    """The scheduler section's choices: the registered policies, tagged by `type` (absent: the
    first registered); its discriminator's help lists what each policy is."""

    def members(self) -> dict[str, type[BaseModel]]:
        return {name: traits.config for name, traits in _REGISTERED.items()}

    def default(self) -> str:
        return default_policy()

    def key_field(self) -> FieldInfo:
        choices: Any = Literal[policy_names()]   # a Literal built at run time
        return FieldInfo(annotation=choices, default=default_policy(), description=_type_description())

    def switch(self, scenario: dict, path: str, name: str) -> dict[str, object]:
        return policy_switch(scenario, name)


SCHEDULER_CHOICES = RegisteredPolicies(SchedulerConfig, "type")
add_choices(SCHEDULER_CHOICES)
SchedulerSection = Annotated[SchedulerConfig, BY_CHOICE]


# ---- knobs by policy (error messages, sweeps, the app's forms) --------------------------------


def policy_config(name: object) -> type[SchedulerConfig] | None:
    """The config model of a registered policy (the default's for None; None if unknown)."""
    traits = _REGISTERED.get(default_policy() if name is None else str(name))
    return traits.config if traits is not None else None


def scheduler_fields() -> dict[str, FieldInfo]:
    """Every knob of every registered policy, first declaration wins, in registration order;
    `type` is a choice of the registered names, its help lists what each one is."""
    return SCHEDULER_CHOICES.fields()


def _type_description() -> str:
    choices = "; ".join(f"{name} ({traits.config.model_fields['type'].description})"
                        for name, traits in _REGISTERED.items())
    return f"Batching policy: {choices}."


def for_policy(section: dict, name: str) -> dict:
    """A scheduler section (a dict) switched to policy `name`: the knobs `name` does not read
    are left out, the others (the shared ones included) keep their values."""
    return SCHEDULER_CHOICES.switched(section, name)


def policy_switch(scenario: dict, name: str) -> dict[str, object]:
    """What switching a scenario (a dict) to policy `name` changes besides the type: dotted path
    -> new value, None for a knob to leave out. The new policy's implied changes are made; a
    scheduler knob the old policy forced goes back to the new policy's default."""
    section = scenario.get("scheduler") or {}
    model, old = policy_config(name), _REGISTERED.get(str(section.get("type", default_policy())))
    if model is None:
        return {}
    changes: dict[str, object] = {f"scheduler.{key}": None for key in section if key not in model.model_fields}
    for path in (old.implied_changes if old is not None and old.name != name else {}):
        knob = path.removeprefix("scheduler.")
        if knob != path and knob in model.model_fields:
            changes[path] = model.model_fields[knob].default
    changes.update(_REGISTERED[name].implied_changes)
    return changes
