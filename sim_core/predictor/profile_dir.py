"""Find and load the profiles of one model on one device in a folder laid out as Vidur's:

    DIR/compute/<device>/<org>/<model>/mlp.csv, attention.csv
    DIR/network/<node>/all_reduce.csv, send_recv.csv

Folder names are mapped to catalog ids (`a100` -> `a100-80gb`, `meta-llama/Llama-2-7b-hf` ->
`llama-2-7b`, `a100_pairwise_nvlink` -> `a100-80gb`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pandas as pd

from sim_core.catalog.vidur_names import device_id, model_id
from sim_core.errors import ConfigError
from sim_core.predictor.profiles import read_attention, read_collective, read_mlp


@dataclass(frozen=True)
class ComputeProfile:
    """Where the compute profile of one (device, model) pair lives."""

    device: str
    model: str
    folder: Path

    @property
    def files(self) -> list[Path]:
        return [p for p in (self.folder / "mlp.csv", self.folder / "attention.csv") if p.is_file()]


@dataclass
class ProfileSet:
    """Per-operator rows (all TP degrees) of one model on one device, and the files read."""

    device: str
    model: str
    operators: dict[str, pd.DataFrame] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def find_compute_profiles(root: str | Path) -> list[ComputeProfile]:
    """Every compute profile folder under `root` (sorted), or a ConfigError if there is none."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root}: profiles folder not found")
    found = []
    for csv in sorted((root / "compute").glob("*/*/*/*.csv")):
        if csv.name in ("mlp.csv", "attention.csv"):
            folder = csv.parent
            profile = ComputeProfile(device_id(folder.parent.parent.name),
                                     model_id(f"{folder.parent.name}/{folder.name}"), folder)
            if profile not in found:
                found.append(profile)
    if not found:
        raise ConfigError(f"{root}: no compute/<device>/<org>/<model>/mlp.csv or attention.csv found")
    return found


def network_folders(root: str | Path, device: str) -> list[Path]:
    """network/<node> folders of `device` (NVLink nodes first)."""
    folders = [f for f in sorted((Path(root) / "network").glob("*")) if f.is_dir() and device_id(f.name) == device]
    return sorted(folders, key=lambda f: "nvlink" not in f.name)


def load_profile_set(root: str | Path, model: str, device: str) -> ProfileSet:
    """All operator rows for `model` on `device` under `root`.

    Raises:
        ConfigError: no compute profile of that pair (the message lists the ones present).
        ProfileError: a CSV is malformed (file, row, column, reason).
    """
    profiles = find_compute_profiles(root)
    match = [p for p in profiles if p.model == model and p.device == device]
    if not match:
        have = ", ".join(f"{p.model} on {p.device}" for p in profiles)
        raise ConfigError(f"{root}: no compute profile of {model} on {device}; found: {have}")
    result = ProfileSet(device, model)
    folder = match[0].folder
    _add(result, folder / "mlp.csv", read_mlp)
    _add(result, folder / "attention.csv", read_attention)
    for node in network_folders(root, device)[:1]:
        for op in ("all_reduce", "send_recv"):
            _add(result, node / f"{op}.csv", partial(_collective, op))
    return result


def _collective(op: str, path: Path) -> dict[str, pd.DataFrame]:
    return {op: read_collective(path, op)}


def _add(result: ProfileSet, path: Path, reader: Callable[[Path], dict[str, pd.DataFrame]]) -> None:
    if path.is_file():
        result.operators.update(reader(path))
        result.files.append(path)
