"""The learned cost model: the roofline's operator structure with profiled operators replaced
by scikit-learn predictions looked up on precomputed grids.

Operators the profile lacks (e.g. the LM head, MoE routing, collectives without a network
profile) keep their roofline price; `sources` says which is which.
"""

from __future__ import annotations

import numpy as np

from sim_core.catalog import DeviceSpec, ModelSpec
from sim_core.config import SimulationConfig
from sim_core.config.predictor import LearnedPredictorConfig
from sim_core.errors import ConfigError
from sim_core.predictor import operators as ops
from sim_core.predictor.host import engine_host_config
from sim_core.predictor.learned_tables import LearnedTables, cached_tables
from sim_core.predictor.profile_dir import load_profile_set
from sim_core.predictor.roofline import RooflinePredictor


class LearnedPredictor(RooflinePredictor):
    """Stage times from learned tables, falling back to the roofline per operator."""

    def __init__(self, model: ModelSpec, device: DeviceSpec, tp: int, pp: int, cfg: LearnedPredictorConfig,
                 tables: LearnedTables) -> None:
        self.tables = tables
        super().__init__(model, device, tp, pp, cfg)

    @property
    def sources(self) -> dict[str, str]:
        """Operator name -> 'learned' or 'roofline' (what priced it)."""
        names = self.breakdown_names()
        learned = set(self.tables.token) | {n for n, t in (("attn_prefill", self.tables.prefill),
                                                           ("attn_decode", self.tables.decode)) if t}
        learned |= {"tp_all_reduce"} if "all_reduce" in self.tables.collective else set()
        learned |= {"pp_send_recv"} if "send_recv" in self.tables.collective else set()
        return {name: "learned" if name in learned else "roofline" for name in names}

    def breakdown_names(self) -> list[str]:
        from sim_core.predictor.shape import BatchShape

        return [n for s in range(self.pp) for n in self.breakdown(BatchShape(1, 1, (), 1, 1), s)
                if not n.startswith("cpu_")]

    def kernel_times(self, tokens: ops.Amount) -> dict[str, ops.Amount]:
        times = super().kernel_times(tokens)
        for name, table in self.tables.token.items():
            if name in times:
                times[name] = table(tokens)
        return times

    def _bytes(self, tokens: np.ndarray) -> np.ndarray:
        return ops.activation_bytes(self.model.embedding_dim, tokens)

    def layer_ops(self, tokens: np.ndarray) -> dict[str, np.ndarray]:
        times = super().layer_ops(tokens)
        if self.tp > 1 and "all_reduce" in self.tables.collective:
            times["tp_all_reduce"] = 2 * self.tables.collective["all_reduce"](self._bytes(tokens))
        return times

    def stage_token_ops(self, tokens: np.ndarray, stage: int) -> dict[str, np.ndarray]:
        extra = super().stage_token_ops(tokens, stage)
        if "emb" in extra and "emb" in self.tables.token:
            extra["emb"] = self.tables.token["emb"](tokens)
        if "pp_send_recv" in extra and "send_recv" in self.tables.collective:
            extra["pp_send_recv"] = self.tables.collective["send_recv"](self._bytes(tokens))
        return extra

    def prefill_attention(self, chunk: int, context: int) -> float:
        if self.tables.prefill is None:
            return super().prefill_attention(chunk, context)
        return float(self.tables.prefill(np.float64(context), np.float64(chunk)))

    def decode_scalar(self, num_decodes: int, context: int) -> float:
        if self.tables.decode is None:
            return super().decode_scalar(num_decodes, context)
        return float(self.decode_attention(np.array([num_decodes], dtype=np.float64),
                                           np.array([context], dtype=np.float64))[0])

    def decode_attention(self, num_decodes: np.ndarray, context: np.ndarray) -> np.ndarray:
        if self.tables.decode is None:
            return super().decode_attention(num_decodes, context)
        return self.tables.decode(num_decodes, context / np.maximum(num_decodes, 1.0))


def build_learned_predictor(config: SimulationConfig) -> LearnedPredictor:
    """Train (or load from the cache) the tables of the scenario's model, device and TP.

    Raises:
        ConfigError: no profile of this model/device, or none at this TP degree.
        ProfileError: a CSV is malformed.
    """
    cfg, tp = engine_host_config(config), config.cluster.tensor_parallel_size
    assert isinstance(cfg, LearnedPredictorConfig), "called for the learned predictor only"
    assert cfg.profiles_dir is not None, "SimulationConfig requires it for the learned predictor"
    profiles = load_profile_set(cfg.profiles_dir, config.model, config.device)
    tables = cached_tables(profiles, tp, cfg.estimator, cfg.cache_dir)
    if not tables.token and tables.prefill is None and tables.decode is None:
        degrees = sorted({int(t) for f in profiles.operators.values() for t in f["tp"].unique()})
        raise ConfigError(f"predictor.profiles_dir: the profiles of {config.model} on {config.device} have "
                          f"tensor-parallel degrees {', '.join(map(str, degrees))}; the scenario uses {tp}")
    return LearnedPredictor(config.model_spec(), config.device_spec(), tp,
                            config.cluster.pipeline_parallel_size, cfg, tables)
