"""Replay a measured run through the simulator and measure the simulated requests the way the
client measured the real ones: per load stage (requests grouped by the stage they were sent in),
mean and percentiles over the requests that finished, TTFT from send to first token, E2E from
send to last token, `itl` from the means (see measured.METRICS)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sim_core.accuracy.measured import WHOLE_RUN, MeasuredRun, MeasuredStage, latency_figures
from sim_core.config import SimulationConfig, parse_config
from sim_core.engine.budget import Limits
from sim_core.engine.simulation import CLI_LIMITS, run_simulation
from sim_core.results.overload import request_trend
from sim_core.results.result import SimulationResult


@dataclass(frozen=True)
class Replay:
    """A measured run, its simulation and the simulated figures per measured stage."""

    run: MeasuredRun
    result: SimulationResult
    stages: tuple[MeasuredStage, ...]     # the simulated figures, one per stage of run.stages
    collapsed: bool                       # the simulated queue grows without bound


def scenario_config(run: MeasuredRun, overrides: dict[str, Any] | None = None) -> SimulationConfig:
    """The run's scenario with `overrides` merged in, section by section (e.g.
    {"predictor": {"type": "silicon"}} changes the predictor's type and keeps its other knobs;
    a `predictor.calibration` file fills what neither sets)."""
    document = {**run.scenario, "workload": {"num_requests": max(len(run.workload), 1)}}
    for key, value in (overrides or {}).items():
        current = document.get(key)
        document[key] = {**current, **value} if isinstance(current, dict) and isinstance(value, dict) else value
    return parse_config(document, base_dir=None, source=run.name)


def replay(run: MeasuredRun, overrides: dict[str, Any] | None = None, limits: Limits | None = CLI_LIMITS) -> Replay:
    """Simulate `run` (with `overrides`) and measure it stage by stage; `limits` bound its cost
    and wall time as `run_simulation`'s do.

    Raises:
        ConfigError: the run's scenario is invalid. BudgetError, RunTimeLimit: over `limits`.
    """
    config = scenario_config(run, overrides)
    result = run_simulation(config, run.workload, limits=limits)
    requests = result.requests
    stages = tuple(simulated_stage(requests, stage, run.output_tokens) for stage in run.stages)
    return Replay(run, result, stages, request_trend(requests).over_capacity)


def measured_collapse(run: MeasuredRun) -> bool:
    """Whether the real server fell behind for good: requests failed (client time-outs), or, with
    per-request data, the queue of requests still without a first token kept growing to the last
    arrival (the same trend test as the replay's)."""
    if run.saturated:
        return True
    if run.requests is None or not len(run.requests):
        return False
    frame = run.requests
    served = pd.DataFrame({"arrived_at": frame["arrived_at"], "scheduled_at": frame["arrived_at"] + frame["ttft"]})
    return request_trend(served).over_capacity


def simulated_stage(requests: pd.DataFrame, measured: MeasuredStage, output_tokens: float) -> MeasuredStage:
    """The simulated figures of the requests sent in `measured`'s window (all of them for the
    whole run)."""
    sent = requests["arrived_at"].to_numpy(np.float64)
    mine = requests if measured.index == WHOLE_RUN else requests[(sent >= measured.start_s) & (sent < measured.end_s)]
    finished = mine[mine["status"] == "finished"]
    values = {metric: latency_figures(finished[metric].to_numpy(np.float64)) for metric in ("ttft", "e2e")}
    values["itl"] = {"mean": itl_from_means(values["e2e"]["mean"], values["ttft"]["mean"], output_tokens)}
    return MeasuredStage(measured.index, measured.start_s, measured.end_s, measured.rate, len(mine),
                         len(mine) - len(finished), values)


def itl_from_means(e2e_mean: float, ttft_mean: float, output_tokens: float) -> float:
    """(mean E2E - mean TTFT) / (output tokens - 1): the time per output token after the first."""
    return (e2e_mean - ttft_mean) / (output_tokens - 1) if output_tokens > 1 else float("nan")
