"""Batch cost models: a batch shape in, a stage time out (never entities, never the clock)."""

from __future__ import annotations

from sim_core.config import SimulationConfig
from sim_core.config.predictor import (
    LearnedPredictorConfig,
    LinearPredictorConfig,
    OperatorModelConfig,
    SiliconPredictorConfig,
)
from sim_core.errors import ConfigError
from sim_core.predictor.eager import EagerLaunch
from sim_core.predictor.grid import GridPredictor
from sim_core.predictor.host import engine_host_config
from sim_core.predictor.linear import LinearPredictor
from sim_core.predictor.roofline import RooflinePredictor
from sim_core.predictor.shape import BatchShape, Predictor, padded, shape_of
from sim_core.predictor.silicon import SiliconPredictor
from sim_core.predictor.silicon_tables import has_silicon_data, silicon_devices

__all__ = ["BatchShape", "LinearPredictor", "Predictor", "RooflinePredictor", "SiliconPredictor", "build_predictor",
           "has_silicon_data", "padded", "shape_of"]


def build_predictor(config: SimulationConfig) -> LinearPredictor | RooflinePredictor | SiliconPredictor:
    """The scenario's predictor: `linear`, `roofline`, `learned` (trained on profiles) or
    `silicon` (measured kernel tables); a per-operator one with the engine's launch floor for
    steps too large for a CUDA graph (`SchedulerConfig.eager_launch`, eager.py).

    Raises:
        ConfigError, ProfileError: the learned predictor's profiles are missing or malformed; the
            silicon predictor has no tables for the device.
    """
    predictor = _build(config)
    eager = config.scheduler.eager_launch()
    if eager is not None and isinstance(predictor, GridPredictor):
        predictor.set_eager_launch(EagerLaunch(*eager), config.model_spec())
    return predictor


def _build(config: SimulationConfig) -> LinearPredictor | RooflinePredictor | SiliconPredictor:
    cfg = config.predictor
    if isinstance(cfg, LinearPredictorConfig):
        return LinearPredictor(cfg.base_s, cfg.per_token_s)
    tp, pp = config.cluster.tensor_parallel_size, config.cluster.pipeline_parallel_size
    cfg = engine_host_config(config)      # the host phases at the engine's factor
    if isinstance(cfg, LearnedPredictorConfig):
        from sim_core.predictor.learned import build_learned_predictor

        return build_learned_predictor(config)
    if isinstance(cfg, SiliconPredictorConfig):
        if not has_silicon_data(config.device):
            raise ConfigError(f"predictor.type silicon: no measured kernel data for device '{config.device}' "
                              f"(devices with data: {', '.join(silicon_devices())}); use type roofline")
        return SiliconPredictor(config.model_spec(), config.device, config.device_spec(), tp, pp, cfg,
                                kv_cache_dtype=config.kv_cache_dtype())
    assert isinstance(cfg, OperatorModelConfig), f"unknown predictor {cfg.type}"
    return RooflinePredictor(config.model_spec(), config.device_spec(), tp, pp, cfg, config.kv_cache_dtype(),
                             config.moe_layout())
