"""The sweep spec: a base scenario, the fields to vary, the SLOs, the capacity search and prices.

    base: scenario.yaml                 # a path (relative to the spec) or an inline scenario
                                        # (no cluster.global_scheduler: least_outstanding)
    vary: {scheduler.type: [vllm, sarathi], cluster.num_replicas: [1, 2]}
    slo: {ttft_p90_s: 2.0, tbt_p99_s: 0.2}   # + attainment: 0.9 for goodput (sweep/goodput.py)
    search: {qps_min: 0.25, qps_max: 64, num_requests: 400}   # num_requests per replica
    gpu_hour_usd: 2.5

`load_sweep` validates everything a spec can get wrong on its own (unknown keys, values outside
a field's range or choices, SLO names) with a one-line error naming the key and what is allowed.

A point whose scheduler.type (or another section's discriminator, e.g. predictor.type) differs
from the base's keeps the base's knobs of that section that the point's choice reads and drops
the others (`with_choice`); a varied knob that the point's choice does not read makes the point
invalid, so the grid skips it with the reason.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from sim_core.config import SimulationConfig, parse_config
from sim_core.config.choices import read_by, section_fields, with_choice
from sim_core.config.errors import describe_validation_error, error_location
from sim_core.config.loading import read_mapping
from sim_core.config.sections import Strict
from sim_core.errors import ConfigError
from sim_core.export.text import shorten
from sim_core.results.metrics import PERCENTILES

SLO_METRICS = tuple(f"{name}_p{p}_s" for name in ("ttft", "tbt", "e2e", "scheduling_delay") for p in PERCENTILES)
ATTAINMENT = "attainment"   # slo.attainment: the goodput criterion (see sweep/goodput.py)
SEARCH_OWNED = {
    "workload.arrival.qps": "the arrival rate is what the capacity search varies (search.qps_min .. qps_max)",
    "workload.target_qps": "the arrival rate is what the capacity search varies (search.qps_min .. qps_max)",
    "workload.num_requests": "requests per probe come from search.num_requests",
    "workload.max_trace_requests": "requests per probe come from search.num_requests",
    "engine.record": "probes keep only per-request rows (engine.record: requests)",
}
RATE_PROCESSES = ("poisson", "gamma", "constant", "bursty", "diurnal")
PLANNER_ROUTER = "least_outstanding"   # the sweep's router when the base scenario names none
MAX_GRID_POINTS = 10_000   # a grid is built in memory, point by point, before anything runs


class SearchSettings(BaseModel):
    """How the capacity search probes arrival rates."""

    model_config = Strict

    @property
    def longest_probe(self) -> int:
        """Requests per replica of the search's longest probe (the confirming one)."""
        return self.num_requests * max(1, self.confirm_length)

    qps_min: float = Field(0.25, gt=0.0, le=1_000_000.0, description=(
        "Lowest arrival rate tried (req/s); a configuration that misses the SLOs even here gets max_qps 0."))
    qps_max: float = Field(64.0, gt=0.0, le=1_000_000.0, description=(
        "Highest arrival rate tried (req/s); a configuration that meets the SLOs here is reported at qps_max."))
    num_requests: int = Field(400, ge=10, le=10_000_000, description=(
        "Requests simulated per probe for each replica of the cluster (a trace: its first N, arrival "
        "times rescaled to each rate; a trace shorter than the confirming probe is resampled at every "
        "probe length)."))
    warmup: float = Field(0.2, ge=0.0, le=0.9, description=(
        "Share of a probe's requests, the first to arrive, left out of its measurement window."))
    tolerance: float = Field(0.05, ge=0.001, le=1.0, description=(
        "Stop when the lowest failing rate is within this fraction above the highest passing one."))
    confirm_length: int = Field(4, ge=0, le=64, description=(
        "The answer is confirmed by one probe this many times longer (tail percentiles such as TBT "
        "p99 are noisy on short probes); when it fails, the search goes on below with such probes. "
        "0 or 1: no confirmation."))
    repeats: int = Field(1, ge=0, le=10, description=(
        "Probes repeated with other seeds at the answer and at the failing rate above it; a "
        "disagreement widens the reported range and lowers the answer to a rate that always passed. A "
        "short probe that failed by a margin within its window's noise is reseeded once whatever this is."))


class SweepSpec(BaseModel):
    """A grid of scenarios and what each must meet; see the module docstring."""

    model_config = Strict

    base: str | dict[str, Any] = Field(description=(
        "The scenario every point starts from: a file (relative to the spec's folder) or a mapping."))
    vary: dict[str, list] = Field(default_factory=dict, description=(
        "Dotted scenario keys -> lists of values; the grid is their product (empty: the base alone)."))
    slo: dict[str, float] = Field(description=(
        f"Latency limits in seconds that a rate must meet, e.g. ttft_p90_s: 2.0; keys: {', '.join(SLO_METRICS)}. "
        f"With {ATTAINMENT}: 0.9 a rate must instead have that share of its requests meet every limit "
        "(the percentile in a key is then ignored; TBT limits bound each request's mean TPOT)."))
    search: SearchSettings = Field(default_factory=SearchSettings, description="Capacity search settings.")
    gpu_hour_usd: float | dict[str, float] = Field(2.5, description=(
        "Price of one GPU-hour in USD, or a mapping device id -> price when the grid varies the device."))
    name: str | None = Field(None, description="Optional label shown in reports.")

    @field_validator("vary", mode="before")
    @classmethod
    def _listify(cls, vary: object) -> object:
        return {k: v if isinstance(v, list) else [v] for k, v in vary.items()} if isinstance(vary, dict) else vary

    @model_validator(mode="after")
    def _check(self) -> SweepSpec:
        if self.search.qps_min >= self.search.qps_max:
            raise ValueError(f"search.qps_min: got {self.search.qps_min:g}; must be below search.qps_max "
                             f"({self.search.qps_max:g})")
        unknown = [key for key in self.slo if key not in (*SLO_METRICS, ATTAINMENT)]
        if unknown:
            raise ValueError(f"slo: unknown metric '{unknown[0]}'; allowed: {', '.join(SLO_METRICS)}, {ATTAINMENT}")
        if not set(self.slo) - {ATTAINMENT}:
            raise ValueError(f"slo: give at least one limit, e.g. ttft_p90_s: 2.0 (allowed: {', '.join(SLO_METRICS)})")
        bad = [(key, value) for key, value in self.slo.items() if not value > 0 and key != ATTAINMENT]
        if bad:
            raise ValueError(f"slo.{bad[0][0]}: got {bad[0][1]!r}; allowed range 0 (exclusive) .. inf seconds")
        share = self.slo.get(ATTAINMENT, 1.0)
        if not 0.0 < share <= 1.0:
            raise ValueError(f"slo.{ATTAINMENT}: got {share!r}; allowed range 0 (exclusive) .. 1 (a share of requests)")
        prices = self.gpu_hour_usd.values() if isinstance(self.gpu_hour_usd, dict) else [self.gpu_hour_usd]
        if any(not price >= 0 for price in prices):
            raise ValueError("gpu_hour_usd: prices must be >= 0 USD per GPU-hour")
        for key, values in self.vary.items():
            if not values:
                raise ValueError(f"vary.{key}: give at least one value")
        _check_grid_size(self.vary)
        return self


def _check_grid_size(vary: dict[str, list]) -> None:
    """Refuse a grid of more than MAX_GRID_POINTS points before any point is built."""
    size = math.prod(len(values) for values in vary.values())
    if size > MAX_GRID_POINTS:
        factors = " x ".join(f"{shorten(key, 60)} {len(values):,}" for key, values in list(vary.items())[:8])
        more = f" x ... ({len(vary) - 8} more keys)" if len(vary) > 8 else ""
        raise ValueError(f"vary: the grid has {size:,} points ({factors}{more}); allowed at most {MAX_GRID_POINTS:,} "
                         "(split the sweep or vary fewer values)")


def load_sweep_spec(path: str | Path) -> tuple[SweepSpec, dict]:
    """Read and check a spec file; returns the spec and its base scenario (validated, as a dict).

    Raises:
        ConfigError: naming the file and the key (vary key, SLO, search setting) and what is allowed.
    """
    path = Path(path)
    return parse_sweep_spec(read_mapping(path), base_dir=path.parent, source=str(path))


def parse_sweep_spec(data: dict, base_dir: str | Path | None = None,
                     source: str = "sweep spec") -> tuple[SweepSpec, dict]:
    """Validate a spec mapping (relative paths resolve against `base_dir`)."""
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {describe_validation_error(exc, SweepSpec)}") from None
    base = _base_scenario(spec.base, Path(base_dir) if base_dir is not None else None, source)
    for key, values in spec.vary.items():
        check_vary_key(key, source)
        for index, value in enumerate(values):
            check_vary_value(base, key, index, value, source)
    _check_rate(base, source)
    return spec, base


def _base_scenario(base: str | dict, base_dir: Path | None, source: str) -> dict:
    anchor: Path | None
    if isinstance(base, str):
        path = Path(base) if base_dir is None or Path(base).is_absolute() else base_dir / base
        data, anchor, where = read_mapping(path), path.parent, str(path)
    else:
        data, anchor, where = base, base_dir, f"{source}: base"
    return parse_config(with_planner_router(data), base_dir=anchor, source=where).model_dump(mode="json")


def with_planner_router(scenario: dict) -> dict:
    """The scenario with the planner's router, `least_outstanding`, unless it names one
    (cluster.global_scheduler): a scenario's own default, round robin, and Vidur's `lor` (which
    piles requests on replica 0 while queues are empty) understate a cluster's capacity."""
    cluster = scenario.get("cluster")
    if isinstance(cluster, dict) and "global_scheduler" in cluster:
        return scenario
    return set_path(scenario, "cluster.global_scheduler", PLANNER_ROUTER)


def check_vary_key(key: str, source: str = "sweep spec") -> None:
    """Raise a ConfigError unless `key` is a dotted path to a scenario field the search leaves alone."""
    if key in SEARCH_OWNED:
        raise ConfigError(f"{source}: vary.{key}: cannot be varied: {SEARCH_OWNED[key]}")
    model: type[BaseModel] | None = SimulationConfig
    walked: list[str] = []
    for part in key.split("."):
        fields = section_fields(model) if model is not None else {}
        if part not in fields:
            where = ".".join(walked) or "the scenario"
            known = ", ".join(fields) if model else "none (it is a single value)"
            raise ConfigError(f"{source}: vary.{key}: unknown key; fields of {where}: {known}")
        walked.append(part)
        annotation = fields[part].annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def check_vary_value(base: dict, key: str, index: int, value: object, source: str = "sweep spec") -> None:
    """Raise a ConfigError when `value` is wrong for the field itself (type, range, choices).

    Values that are only wrong together with the base's other fields (e.g. a TP degree that does
    not divide this model's heads, a knob the base's policy does not read) pass here: another
    varied key may fix them, and the grid reports such combinations as skipped."""
    try:
        SimulationConfig.model_validate(with_choice(read_by(base, key), key, value))
    except ValidationError as exc:
        parts = tuple(key.split("."))
        if any(tuple(map(str, error_location(SimulationConfig, err)))[:len(parts)] == parts
               for err in exc.errors()):
            raise ConfigError(f"{source}: vary.{key}[{index}]: "
                              f"{describe_validation_error(exc, SimulationConfig)}") from None


def _check_rate(base: dict, source: str) -> None:
    workload = base["workload"]
    process = workload["arrival"]["process"]
    if not workload.get("trace_file") and process not in RATE_PROCESSES:
        raise ConfigError(f"{source}: base workload.arrival.process: got '{process}'; the capacity search sets "
                          f"an arrival rate, allowed one of: {', '.join(RATE_PROCESSES)} (or a trace_file)")


def set_path(data: dict, key: str, value: object) -> dict:
    """A copy of the nested dict `data` with `value` at the dotted `key` (copies along the path only)."""
    head, _, rest = key.partition(".")
    copy = dict(data)
    copy[head] = set_path(data.get(head) or {}, rest, value) if rest else value
    return copy
