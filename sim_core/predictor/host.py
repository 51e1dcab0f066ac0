"""The host phases an engine runs at: the predictor's `cpu_<phase>_s` knobs (and their
per-request parts) times the engine's own factor (`SchedulerConfig.host_phase_scale`; vllm_v1:
`host_scale`, measured on vLLM 0.15, docs/accuracy.md). The predictor's knobs describe a generic
host loop that every policy shares; an engine whose measured loop is leaner or heavier says so
with one factor, so the phases keep their proportions and the user's own settings keep their
meaning."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim_core.config.predictor import CPU_PHASES, OperatorModelConfig

if TYPE_CHECKING:
    from sim_core.config import SimulationConfig

HOST_KNOBS = tuple(f"cpu_{phase}{part}_s" for phase in CPU_PHASES for part in ("", "_per_request"))


def engine_host_config(config: SimulationConfig) -> OperatorModelConfig:
    """The scenario's predictor section with its host knobs at the engine's factor (the section
    itself when the factor is 1). Does not mutate `config`.

    Raises:
        AssertionError: the scenario's predictor has no host knobs (linear).
    """
    cfg = config.predictor
    assert isinstance(cfg, OperatorModelConfig), "only the per-operator models price the host"
    scale = config.scheduler.host_phase_scale()
    if scale == 1.0:
        return cfg
    return cfg.model_copy(update={knob: getattr(cfg, knob) * scale for knob in HOST_KNOBS})
