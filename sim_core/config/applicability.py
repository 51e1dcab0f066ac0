"""Which knobs of a section apply under which choice of its discriminator.

A section such as `predictor` has a discriminator field (`type`) and knobs that only some of its
values read (`base_s` is the linear model's). The UI shows a knob only when it applies; a knob not
listed here applies always. `tests/test_presets_and_sharing.py` keeps this table in step with the
field descriptions, which start with the values they apply to ("linear: ..."). (The scheduler
section needs no table: each policy's config model holds only its knobs, see policies.py.)
"""

from __future__ import annotations

from typing import cast

from pydantic import BaseModel

from sim_core.config.sections import CPU_PHASES

_BOUNDED = ("uniform", "zipf", "lognormal")
_LENGTH = ("distribution", {"value": ("fixed",), "min": _BOUNDED, "max": _BOUNDED, "theta": ("zipf",),
                            "mean": ("lognormal",), "sigma": ("lognormal",), "trace_file": ("empirical",)})

APPLIES: dict[str, tuple[str, dict[str, tuple[str, ...]]]] = {
    "predictor": ("type", {
        "base_s": ("linear",), "per_token_s": ("linear",),
        "compute_efficiency": ("roofline",), "memory_efficiency": ("roofline",), "link_efficiency": ("roofline",),
        **{f"cpu_{phase}{per}_s": ("roofline", "learned") for phase in CPU_PHASES for per in ("", "_per_request")},
        "profiles_dir": ("learned",), "estimator": ("learned",), "cache_dir": ("learned",),
    }),
    "memory": ("planner", {"framework_reserve_gib": ("detailed",)}),
    "workload.arrival": ("process", {
        "cv": ("gamma",), "on_s": ("bursty",), "off_s": ("bursty",), "off_qps": ("bursty",),
        "period_s": ("diurnal",), "amplitude": ("diurnal",), "rate_curve": ("diurnal",), "trace_file": ("replay",),
    }),
    "workload.prompt_tokens": _LENGTH,
    "workload.output_tokens": _LENGTH,
}


def applies(section: str, field: str, values: dict) -> bool:
    """Whether `field` of the section at dotted path `section` is read, given the section's
    current values (a dict; the discriminator's default is assumed when absent)."""
    if section not in APPLIES:
        return True
    discriminator, table = APPLIES[section]
    if field == discriminator or field not in table:
        return True
    return values.get(discriminator, _default(section, discriminator)) in table[field]


def _default(section: str, field: str) -> object:
    from sim_core.config.simulation import SimulationConfig

    model: type[BaseModel] = SimulationConfig
    for part in section.split("."):
        model = cast(type[BaseModel], model.model_fields[part].annotation)   # sections are models
    return model.model_fields[field].default
