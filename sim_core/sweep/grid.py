"""The grid of a sweep: the product of the varied values, each point a validated scenario with a
key that changes whenever anything that decides its result changes (resume uses it)."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from sim_core.cluster.pools import num_gpus
from sim_core.config import parse_config
from sim_core.config.choices import discriminator_of, with_choice
from sim_core.errors import ConfigError
from sim_core.sweep.spec import SweepSpec

SEARCH_VERSION = 9   # bump when the search's decisions change: old journal entries stop matching


@dataclass(frozen=True)
class Point:
    """One configuration of the grid.

    Attributes:
        values: varied key -> value (in the order of `vary`).
        scenario: the full scenario (validated, every default spelled out) before the search
            sets its rate and request count.
        key: hash of the scenario, the SLOs, the search settings and the trace files' stamps.
        device, num_gpus: what it runs on (replicas x TP x PP GPUs, over both pools with P/D).
    """

    values: dict
    scenario: dict
    key: str
    device: str
    num_gpus: int

    def label(self) -> str:
        """A short name: the varied values (or 'base' when nothing varies)."""
        return ", ".join(f"{key.split('.')[-1]}={value}" for key, value in self.values.items()) or "base"


@dataclass(frozen=True)
class Grid:
    points: list[Point]
    skipped: list[tuple[dict, str]]   # (values, reason) of combinations that do not validate


def build_grid(spec: SweepSpec, base: dict) -> Grid:
    """Every combination of the varied values, in `vary` order (last key fastest).

    Raises:
        ConfigError: no combination validates, or a device has no price.
    """
    keys = list(spec.vary)
    points, skipped = [], []
    for combo in itertools.product(*spec.vary.values()):
        values = dict(zip(keys, combo))
        scenario = base
        for key, value in sorted(values.items(), key=lambda item: discriminator_of(item[0]) is None):
            scenario = with_choice(scenario, key, value)   # choices first: they keep the knobs varied with them
        try:
            config = parse_config(scenario, source=_label(values))
        except ConfigError as error:
            skipped.append((values, str(error)))
            continue
        dumped = config.model_dump(mode="json")
        points.append(Point(values, dumped, point_key(dumped, spec), config.device, num_gpus(config)))
    if not points:
        raise ConfigError(f"sweep: none of the {len(skipped)} combination(s) is a valid scenario; "
                          f"the first: {skipped[0][1]}")
    _check_prices(spec, points)
    return Grid(points, skipped)


def _label(values: dict) -> str:
    return "point " + (", ".join(f"{key}={value}" for key, value in values.items()) or "base")


def point_key(scenario: dict, spec: SweepSpec) -> str:
    """A 16-hex-digit hash of what decides a point's result."""
    decided_by = {"scenario": scenario, "slo": dict(sorted(spec.slo.items())), "search": spec.search.model_dump(),
                  "version": SEARCH_VERSION, "files": _file_stamps(scenario)}
    text = json.dumps(decided_by, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _file_stamps(scenario: dict) -> list:
    """(path, size, modification time) of the trace files a scenario reads: an edited trace
    gives its points new keys."""
    workload = scenario["workload"]
    paths = [workload.get("trace_file")] + [workload[s].get("trace_file")
                                            for s in ("arrival", "prompt_tokens", "output_tokens")]
    stamps = []
    for path in filter(None, paths):
        stat = Path(path).stat() if Path(path).is_file() else None
        stamps.append([path, stat.st_size if stat else None, stat.st_mtime_ns if stat else None])
    return stamps


def _check_prices(spec: SweepSpec, points: list[Point]) -> None:
    if not isinstance(spec.gpu_hour_usd, dict):
        return
    missing = sorted({p.device for p in points} - set(spec.gpu_hour_usd))
    if missing:
        raise ConfigError(f"gpu_hour_usd: no price for device '{missing[0]}'; give a price for each of "
                          f"{', '.join(sorted({p.device for p in points}))} or one number for all")


def gpu_hour_price(spec_price: float | dict, device: str) -> float:
    """USD per GPU-hour of `device` under a spec's price (one number, or per device)."""
    return float(spec_price[device] if isinstance(spec_price, dict) else spec_price)
