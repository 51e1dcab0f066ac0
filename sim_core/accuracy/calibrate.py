"""Fit a predictor's device efficiencies and the engine's host and API-server terms to measured
runs of one GPU, and check the fit on runs it did not see.

The terms (each a knob of the scenario; see `TERMS`):

* `compute_efficiency`, `memory_efficiency`: the fractions of the GPU's peak FLOP/s and memory
  bandwidth its kernels reach (roofline and learned predictors);
* `host_scale`: one factor on every host phase of an iteration (`cpu_<phase>_s` and the
  per-request parts): the engine's Python time on the critical path. An engine with a factor of
  its own (vllm_v1's `host_scale`) is fitted and written through it, starting from its default;
  for the others the predictor's phase knobs are scaled;
* `api_server_s`: what the engine's API server adds to each request's TTFT and E2E. It shifts
  latencies without changing the simulation, so for any setting of the others it is solved in
  closed form: the median of measured minus simulated TTFT, within 0 .. API_SERVER_MAX_S (a
  larger gap is queueing the other terms must explain).

The loss is the mean absolute log-ratio of simulated to measured mean TTFT, mean E2E and
time per output token over every measured stage (a ratio, so a 10 ms and a 10 s figure weigh
the same), minimised by coordinate search in log space. Stages are replayed over their first
`window_s` seconds (the load is steady within a stage), which keeps each evaluation to a few
seconds of CPU per run. Saturated runs (client time-outs) are left out: their latencies are
those of the requests that got through.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from sim_core.accuracy.compare import comparison, median_errors
from sim_core.accuracy.measured import WHOLE_RUN, MeasuredRun
from sim_core.accuracy.replay import replay, scenario_config
from sim_core.config.predictor import OperatorModelConfig
from sim_core.errors import ConfigError
from sim_core.predictor.host import HOST_KNOBS

STEPS = (0.3, 0.15, 0.07, 0.03)   # log-space step of each coordinate-search round
LOSS_CAP = math.log(10.0)         # a collapsed stage counts as 10x off, not infinitely
API_SERVER_MAX_S = 0.1            # an API server's share is milliseconds: more is queueing it must not absorb


@dataclass(frozen=True)
class Term:
    """A fitted knob: its name and bounds (values searched multiplicatively)."""

    name: str
    low: float
    high: float


TERMS = {"compute_efficiency": Term("compute_efficiency", 0.05, 1.0),
         "memory_efficiency": Term("memory_efficiency", 0.05, 1.0),
         "host_scale": Term("host_scale", 0.01, 10.0)}


@dataclass
class Calibration:
    """The fitted knobs and how well they do on the runs fitted and on the runs held out."""

    engine: str
    device: str
    predictor: str
    values: dict[str, float]                       # term -> fitted value (api_server_s included)
    knobs: dict[str, dict[str, Any]]               # section -> knob -> value, as the file holds them
    fit_runs: list[str]
    held_out_runs: list[str]
    fit_errors: dict[str, float] = field(default_factory=dict)        # median abs % per figure
    held_out_errors: dict[str, float] = field(default_factory=dict)
    loss: float = float("nan")
    evaluations: int = 0
    left_out: dict[str, str] = field(default_factory=dict)            # run -> why it was not fitted

    def document(self) -> dict[str, Any]:
        """The calibration file's content."""
        return {"calibration": {"engine": self.engine, "device": self.device, "predictor": self.predictor,
                                "fitted_values": self.values, "fit_runs": self.fit_runs,
                                "held_out_runs": self.held_out_runs, "fit_median_abs_error_pct": self.fit_errors,
                                "held_out_median_abs_error_pct": self.held_out_errors, "loss": self.loss,
                                "evaluations": self.evaluations, "left_out": self.left_out},
                **self.knobs}


def split_runs(runs: Sequence[MeasuredRun], hold_out_every: int) -> tuple[list[MeasuredRun], list[MeasuredRun]]:
    """(fit, held out): every `hold_out_every`-th run by name is held out (none when 0, or when
    fewer than 3 runs would be left to fit)."""
    ordered = sorted(runs, key=lambda run: run.name)
    if hold_out_every <= 0 or len(ordered) < 3 or len(ordered) - len(ordered) // hold_out_every < 2:
        return ordered, []
    held = [run for i, run in enumerate(ordered) if i % hold_out_every == hold_out_every - 1]
    return [run for run in ordered if run not in held], held


def truncated(run: MeasuredRun, window_s: float) -> MeasuredRun:
    """The run's requests sent in the first `window_s` seconds of each stage, with the stages'
    figures only (the whole-run figures mix stages)."""
    stages = tuple(s for s in run.stages if s.index != WHOLE_RUN) or run.stages
    sent = run.workload.arrived_at
    keep = np.zeros(len(sent), dtype=bool)
    for stage in stages:
        keep |= (sent >= stage.start_s) & (sent < stage.start_s + window_s)
    return replace(run, workload=run.workload.take(np.flatnonzero(keep)), stages=stages)


def calibrate(runs: Sequence[MeasuredRun], predictor: str = "roofline", window_s: float = 120.0,
              hold_out_every: int = 4, progress: Callable[[str], None] | None = None) -> Calibration:
    """Fit the terms to `runs` (one engine and GPU; saturated and unsupported runs, and runs
    whose scenario the predictor refuses, are left out and listed in `left_out`).

    Raises:
        ConfigError: no run left to fit, or runs of several GPUs or engines.
    """
    left_out = {run.name: reason for run in runs if (reason := left_out_reason(run, predictor))}
    usable = [run for run in runs if run.name not in left_out]
    if not usable:
        raise ConfigError("calibrate: no measured run to fit (saturated runs, and runs the predictor cannot "
                          "replay, are left out)")
    devices = sorted({run.scenario["device"] for run in usable})
    engines = sorted({run.scenario["scheduler"]["type"] for run in usable})
    if len(devices) > 1 or len(engines) > 1:
        raise ConfigError(f"calibrate: one GPU and engine at a time (got {', '.join(devices + engines)}); "
                          "pass the runs of one")
    fit, held = split_runs(usable, hold_out_every)
    start, host = _start(fit[0], predictor)
    search = _Search([truncated(run, window_s) for run in fit], predictor, start, host, progress)
    values = search.minimise(list(start))
    if not any(adds_api_server(run) for run in fit):   # no run's times held the API server: nothing fitted it
        values.pop("api_server_s", None)
    knobs = knob_values(values, host, predictor)
    result = Calibration(engines[0], devices[0], predictor, {k: round(v, 6) for k, v in values.items()},
                         knobs, [run.name for run in fit], [run.name for run in held],
                         loss=round(search.best_loss, 5), evaluations=search.evaluations)
    result.left_out = left_out
    result.fit_errors = _medians(fit, knobs)
    if held:
        result.held_out_errors = _medians(held, knobs)
    return result


def left_out_reason(run: MeasuredRun, predictor: str) -> str:
    """Why `run` is not fitted ("" when it is): unsupported, saturated, or a scenario the
    predictor refuses (e.g. silicon on a model its kernels do not cover)."""
    if run.unsupported or run.saturated:
        return run.unsupported or "saturated (client time-outs)"
    try:
        scenario_config(run, {"predictor": {"type": predictor}})
    except ConfigError as exc:
        return str(exc).removeprefix(f"{run.name}: ")
    return ""


def knob_values(values: dict[str, Any], host: dict[str, float] | None, predictor: str) -> dict[str, dict[str, Any]]:
    """The scenario knobs the fitted terms set, by section: `host_scale` multiplies the host
    knobs `host`, or is the engine's own `host_scale` when `host` is None. `api_server_s` only
    when `values` has it (a fit on per-request logs alone leaves it out: none of their times
    holds the API server, so the engine's default stands for the runs that do)."""
    section: dict[str, Any] = {"type": predictor}
    for name in ("compute_efficiency", "memory_efficiency"):
        if name in values:
            section[name] = round(float(values[name]), 4)
    scale = float(values.get("host_scale", 1.0))
    scheduler: dict[str, Any] = ({"api_server_s": round(float(values["api_server_s"]), 5)}
                                 if "api_server_s" in values else {})
    if host is None:
        scheduler["host_scale"] = round(scale, 4)
    else:
        section.update({knob: round(base * scale, 7) for knob, base in host.items()})
    return {"predictor": section, **({"scheduler": scheduler} if scheduler else {})}


def adds_api_server(run: MeasuredRun) -> bool:
    """Whether the run's measured times hold the API server: not where its reader fixed
    `api_server_s` (a per-request log of vLLM's own stats, request_log.API_SERVER_S)."""
    return "api_server_s" not in (run.scenario.get("scheduler") or {})


def run_overrides(run: MeasuredRun, knobs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`knobs` as they apply to `run`: without `api_server_s` where the run fixes its own."""
    if adds_api_server(run):
        return knobs
    return {**knobs, "scheduler": {k: v for k, v in knobs.get("scheduler", {}).items() if k != "api_server_s"}}


def _start(run: MeasuredRun, predictor: str) -> tuple[dict[str, float], dict[str, float] | None]:
    """(the terms to fit with their starting values, the host knobs host_scale multiplies: None
    when the engine has a host_scale of its own, which it starts from)."""
    config = scenario_config(run, {"predictor": {"type": predictor}})
    cfg = config.predictor
    if not isinstance(cfg, OperatorModelConfig):
        raise ConfigError(f"calibrate: the {predictor} predictor has no efficiency or host terms to fit")
    device = config.device_spec()
    start = {"host_scale": config.scheduler.host_phase_scale()}
    if predictor in ("roofline", "learned"):
        start["compute_efficiency"] = cfg.compute_efficiency or device.compute_efficiency
        start["memory_efficiency"] = cfg.memory_efficiency or device.memory_efficiency
    if "host_scale" in type(config.scheduler).model_fields:
        return start, None
    return start, {knob: float(getattr(cfg, knob)) for knob in HOST_KNOBS}


def _medians(runs: Sequence[MeasuredRun], overrides: dict[str, dict[str, Any]]) -> dict[str, float]:
    table = comparison([replay(run, run_overrides(run, overrides)) for run in runs])
    return {name: round(value, 2) for name, value in median_errors(table).items()}


class _Search:
    """Coordinate search in log space over the terms; api_server_s solved at each point."""

    def __init__(self, runs: list[MeasuredRun], predictor: str, start: dict[str, float], host: dict[str, float] | None,
                 progress: Callable[[str], None] | None) -> None:
        self.runs, self.predictor, self.host, self.progress = runs, predictor, host, progress
        self.best: dict[str, float] = dict(start)
        self.best_loss, self.evaluations = math.inf, 0
        self.best_loss, self.best["api_server_s"] = self._loss(self.best)

    def minimise(self, terms: list[str]) -> dict[str, Any]:
        """Per step size: move the term whose better direction lowers the loss most, until no
        move does; then halve the step."""
        for step in STEPS:
            while True:
                moves = [move for name in terms for move in self._moves(name, step)]
                if not moves:
                    break
                loss, candidate, api = min(moves, key=lambda move: move[0])
                if loss >= self.best_loss - 1e-6:
                    break
                self.best, self.best_loss = {**candidate, "api_server_s": api}, loss
        return dict(self.best)

    def _moves(self, name: str, step: float) -> list[tuple[float, dict[str, Any], float]]:
        term, moves = TERMS[name], []
        for factor in (math.exp(step), math.exp(-step)):
            value = min(max(self.best[name] * factor, term.low), term.high)
            if value != self.best[name]:
                candidate = {**self.best, name: value}
                loss, api = self._loss(candidate)
                moves.append((loss, candidate, api))
        return moves

    def _loss(self, values: dict[str, Any]) -> tuple[float, float]:
        knobs = knob_values({**values, "api_server_s": 0.0}, self.host, self.predictor)
        measured, simulated, served = [], [], []
        for run in self.runs:
            result = replay(run, run_overrides(run, knobs))
            for real, sim in zip(run.stages, result.stages):
                measured.append([real.values["ttft"]["mean"], real.values["e2e"]["mean"]])
                simulated.append([sim.values["ttft"]["mean"], sim.values["e2e"]["mean"]])
                served.append(adds_api_server(run))
        self.evaluations += 1
        real_arr, sim_arr, with_api = np.array(measured), np.array(simulated), np.array(served, dtype=bool)
        residual = (real_arr[:, 0] - sim_arr[:, 0])[with_api]
        api = min(max(0.0, float(np.nanmedian(residual))), API_SERVER_MAX_S) if residual.size else 0.0
        outputs = np.array([run.output_tokens for run in self.runs for _ in run.stages])
        real_itl = (real_arr[:, 1] - real_arr[:, 0]) / (outputs - 1)
        sim_itl = (sim_arr[:, 1] - sim_arr[:, 0]) / (outputs - 1)
        ratios = np.concatenate([(sim_arr + api * with_api[:, None]) / real_arr, (sim_itl / real_itl)[:, None]], axis=1)
        logs = np.minimum(np.abs(np.log(np.where(np.isfinite(ratios) & (ratios > 0), ratios, 10.0))), LOSS_CAP)
        loss = float(logs.mean())
        if self.progress:
            shown = ", ".join(f"{k} {v:.4g}" for k, v in values.items() if k in TERMS)
            self.progress(f"evaluation {self.evaluations}: {shown}, api_server_s {api:.4f} -> loss {loss:.4f}")
        return loss, api
