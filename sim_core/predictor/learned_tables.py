"""Train per-operator models on a profile set and precompute their predictions on grids.

The grids (not the estimators) are what a run uses and what the cache stores: an `.npz` of
plain arrays per (profiles, TP, estimator), keyed by a hash of the CSV bytes and the options,
so loading a cached model never unpickles anything.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sim_core.predictor.profile_dir import ProfileSet
from sim_core.predictor.profiles import FEATURES
from sim_core.predictor.tables import Table1D, Table2D
from sim_core.predictor.training import clean, fit_operator

if TYPE_CHECKING:
    import pandas as pd

TABLES_VERSION = "1"   # bump when training or grids change, so old cache entries are ignored
MAX_AXIS_POINTS = 256
COLLECTIVES = ("all_reduce", "send_recv")


@dataclass
class LearnedTables:
    """Predictions on grids: per-kernel token operators (and `emb`) over tokens, collectives
    over bytes, prefill attention over (cached tokens, chunk), decode attention over
    (batch size, cached tokens per request)."""

    token: dict[str, Table1D] = field(default_factory=dict)
    collective: dict[str, Table1D] = field(default_factory=dict)
    prefill: Table2D | None = None
    decode: Table2D | None = None

    @property
    def operators(self) -> list[str]:
        names = list(self.token) + list(self.collective)
        return names + [n for n, t in (("attn_prefill", self.prefill), ("attn_decode", self.decode)) if t]


def operator_rows(profiles: ProfileSet, operator: str, tp: int) -> pd.DataFrame | None:
    """Cleaned rows of one operator at TP degree `tp` (collectives: `tp` workers; send_recv is
    always between 2), or None when the profile has none."""
    frame = profiles.operators.get(operator)
    if frame is None:
        return None
    if operator != "send_recv":
        frame = frame[frame["tp"] == tp]
    if len(frame) < 2:
        return None
    return clean(frame, FEATURES[operator])[0]


def _axis(values: np.ndarray) -> np.ndarray:
    axis = np.unique(values)
    if len(axis) > MAX_AXIS_POINTS:
        axis = np.unique(np.quantile(axis, np.linspace(0, 1, MAX_AXIS_POINTS), method="nearest"))
    return axis


def train_tables(profiles: ProfileSet, tp: int, estimator: str) -> LearnedTables:
    """Fit every operator the profile has at this TP degree and tabulate its predictions."""
    tables = LearnedTables()
    for operator, features in FEATURES.items():
        rows = operator_rows(profiles, operator, tp)
        if rows is None or len(rows) < 2:
            continue
        predict = fit_operator(rows, features, estimator)
        if len(features) == 1:
            top = rows[features[0]].max()
            axis = np.arange(1, top + 1) if features[0] == "num_tokens" else _axis(rows[features[0]].to_numpy())
            target = tables.collective if operator in COLLECTIVES else tables.token
            target[operator] = Table1D(axis, predict(axis[:, None]))
        else:
            ax, ay = _axis(rows[features[0]].to_numpy()), _axis(rows[features[1]].to_numpy())
            grid = np.stack(np.meshgrid(ax, ay, indexing="ij"), axis=-1).reshape(-1, 2)
            table = Table2D(ax, ay, predict(grid).reshape(len(ax), len(ay)))
            setattr(tables, "prefill" if operator == "attn_prefill" else "decode", table)
    return tables


def cache_key(profiles: ProfileSet, tp: int, estimator: str) -> str:
    """Hash of everything the tables depend on: CSV bytes, TP, estimator, code version."""
    digest = hashlib.sha256(f"{TABLES_VERSION}|{tp}|{estimator}".encode())
    for path in profiles.files:
        digest.update(path.name.encode())
        digest.update(hashlib.sha256(Path(path).read_bytes()).digest())
    return digest.hexdigest()[:32]


def cached_tables(profiles: ProfileSet, tp: int, estimator: str, cache_dir: str | None) -> LearnedTables:
    """The tables from `cache_dir` when present for these inputs, else trained (and stored there)."""
    if not cache_dir:
        return train_tables(profiles, tp, estimator)
    path = Path(cache_dir) / f"learned-{cache_key(profiles, tp, estimator)}.npz"
    if path.is_file():
        return load_tables(path)
    tables = train_tables(profiles, tp, estimator)
    save_tables(tables, path)
    return tables


def save_tables(tables: LearnedTables, path: Path) -> None:
    arrays = {}
    for kind in ("token", "collective"):
        for name, table in getattr(tables, kind).items():
            arrays[f"{kind}:{name}:axis"], arrays[f"{kind}:{name}:values"] = table.axis, table.values
    for name in ("prefill", "decode"):
        table = getattr(tables, name)
        if table is not None:
            arrays[f"{name}:x"], arrays[f"{name}:y"] = table.axis_x, table.axis_y
            arrays[f"{name}:values"] = table.values
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp.npz")
    np.savez(partial, **arrays)
    partial.replace(path)


def load_tables(path: Path) -> LearnedTables:
    tables = LearnedTables()
    with np.load(path, allow_pickle=False) as data:
        for key in data.files:
            parts = key.split(":")
            if parts[0] in ("token", "collective") and parts[2] == "axis":
                getattr(tables, parts[0])[parts[1]] = Table1D(data[key], data[f"{parts[0]}:{parts[1]}:values"])
            elif parts[0] in ("prefill", "decode") and parts[1] == "x":
                setattr(tables, parts[0], Table2D(data[key], data[f"{parts[0]}:y"], data[f"{parts[0]}:values"]))
    return tables
