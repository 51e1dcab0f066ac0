"""How well the cost models match measured profiles, per operator.

* learned: MAPE on held-out rows (a seeded 20% of each operator's cleaned rows, per TP degree)
  of a model trained on the rest;
* roofline: median absolute percentage error of its per-kernel price against every cleaned row
  (nothing is fitted, so every row is held out).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sim_core.catalog import DeviceSpec, ModelSpec
from sim_core.config.predictor import OperatorModelConfig
from sim_core.predictor import operators as ops
from sim_core.predictor.profile_dir import ProfileSet
from sim_core.predictor.profiles import FEATURES
from sim_core.predictor.roofline import RooflinePredictor
from sim_core.predictor.training import clean, holdout_errors

if TYPE_CHECKING:
    import pandas as pd

GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")


@dataclass(frozen=True)
class OperatorAccuracy:
    """Errors of one operator at one TP degree (percent per row)."""

    device: str
    model: str
    operator: str
    tp: int
    num_rows: int
    num_dropped: int
    errors: np.ndarray

    @property
    def mape(self) -> float:
        return float(self.errors.mean()) if len(self.errors) else float("nan")

    @property
    def median(self) -> float:
        return float(np.median(self.errors)) if len(self.errors) else float("nan")


def _groups(profiles: ProfileSet) -> Iterator[tuple[str, int, pd.DataFrame, int]]:
    """(operator, tp, cleaned rows, dropped) for every operator and TP degree of a profile set."""
    for operator, frame in profiles.operators.items():
        for tp in sorted(frame["tp"].unique()):
            rows, dropped = clean(frame[frame["tp"] == tp], FEATURES[operator])
            yield operator, int(tp), rows, dropped


def learned_accuracy(profiles: ProfileSet, estimator: str) -> list[OperatorAccuracy]:
    """Held-out errors of the learned model, per operator and TP degree."""
    return [OperatorAccuracy(profiles.device, profiles.model, op, tp, len(rows), dropped,
                             holdout_errors(rows, FEATURES[op], estimator))
            for op, tp, rows, dropped in _groups(profiles)]


def roofline_accuracy(profiles: ProfileSet, model: ModelSpec, device: DeviceSpec,
                      cfg: OperatorModelConfig) -> list[OperatorAccuracy]:
    """Errors of the uncalibrated (or `cfg`-calibrated) roofline against every cleaned row."""
    result = []
    for op, tp, rows, dropped in _groups(profiles):
        if op not in ("all_reduce", "send_recv") and model.num_q_heads % tp:
            continue
        predicted = roofline_prices(RooflinePredictor(model, device, tp if op != "send_recv" else 1, 1, cfg),
                                    op, rows, tp)
        measured = rows["time_s"].to_numpy()
        result.append(OperatorAccuracy(profiles.device, profiles.model, op, tp, len(rows), dropped,
                                       np.abs(predicted - measured) / measured * 100))
    return result


def roofline_prices(roofline: RooflinePredictor, operator: str, rows: pd.DataFrame, tp: int) -> np.ndarray:
    """The roofline's seconds for each profile row of one operator (one kernel each)."""
    if operator in FEATURES and FEATURES[operator] == ("num_tokens",) and operator != "emb":
        return np.asarray(roofline.kernel_times(rows["num_tokens"].to_numpy(dtype=np.float64))[operator])
    if operator == "emb":
        return roofline.roofs.kernel(ops.embedding(roofline.model.embedding_dim, rows["num_tokens"].to_numpy()))
    if operator == "attn_prefill":
        return np.array([roofline.prefill_attention(q, c) for q, c in
                         zip(rows["prefill_chunk_size"], rows["kv_cache_size"])])
    if operator == "attn_decode":
        batch = rows["batch_size"].to_numpy(dtype=np.float64)
        return roofline.decode_attention(batch, batch * rows["kv_cache_size"].to_numpy(dtype=np.float64))
    if operator == "all_reduce":
        return roofline.roofs.all_reduce(rows["size"].to_numpy(dtype=np.float64), tp)
    return roofline.roofs.send_recv(rows["size"].to_numpy(dtype=np.float64))


def pooled(results: list[OperatorAccuracy], statistic: str = "mape") -> dict[str, float]:
    """Operator name -> error over all its rows (all TP degrees and profiles), in percent:
    the mean (`mape`) or the median (`median`)."""
    by_operator: dict[str, list[np.ndarray]] = {}
    for item in results:
        by_operator.setdefault(item.operator, []).append(item.errors)
    reduce = np.mean if statistic == "mape" else np.median
    return {op: round(float(reduce(np.concatenate(errs))), 2) for op, errs in by_operator.items()
            if sum(len(e) for e in errs)}


def operator_comparison(profiles: ProfileSet, operator: str, tp: int, model: ModelSpec, device: DeviceSpec,
                        cfg: OperatorModelConfig, estimator: str
                        ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(x, measured seconds, {"roofline": prices, "learned": held-in fit}) for one operator's
    cleaned rows at TP `tp`: what a chart of predictions against measurements needs."""
    from sim_core.predictor.training import fit_operator

    frame = profiles.operators[operator]
    rows, _ = clean(frame[frame["tp"] == tp], FEATURES[operator])
    features = FEATURES[operator]
    roofline = RooflinePredictor(model, device, tp if operator != "send_recv" else 1, 1, cfg)
    predicted = {"roofline": roofline_prices(roofline, operator, rows, tp)}
    if len(rows) >= 2:
        predicted[f"learned ({estimator})"] = fit_operator(rows, features, estimator)(rows[list(features)].to_numpy())
    return rows[features[-1]].to_numpy(dtype=np.float64), rows["time_s"].to_numpy(), predicted
