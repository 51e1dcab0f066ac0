"""Batch cost models: a batch shape in, a stage time out (never entities, never the clock)."""

from __future__ import annotations

from sim_core.config import SimulationConfig
from sim_core.config.predictor import LearnedPredictorConfig, LinearPredictorConfig, OperatorModelConfig
from sim_core.predictor.linear import LinearPredictor
from sim_core.predictor.roofline import RooflinePredictor
from sim_core.predictor.shape import BatchShape, Predictor, padded, shape_of

__all__ = ["BatchShape", "LinearPredictor", "Predictor", "RooflinePredictor", "build_predictor", "padded",
           "shape_of"]


def build_predictor(config: SimulationConfig) -> LinearPredictor | RooflinePredictor:
    """The scenario's predictor: `linear`, `roofline` or `learned` (trained on profiles).

    Raises:
        ConfigError, ProfileError: the learned predictor's profiles are missing or malformed.
    """
    cfg = config.predictor
    if isinstance(cfg, LinearPredictorConfig):
        return LinearPredictor(cfg.base_s, cfg.per_token_s)
    tp, pp = config.cluster.tensor_parallel_size, config.cluster.pipeline_parallel_size
    if isinstance(cfg, LearnedPredictorConfig):
        from sim_core.predictor.learned import build_learned_predictor

        return build_learned_predictor(config)
    assert isinstance(cfg, OperatorModelConfig), f"unknown predictor {cfg.type}"
    return RooflinePredictor(config.model_spec(), config.device_spec(), tp, pp, cfg)
