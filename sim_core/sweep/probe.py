"""One probe of the capacity search: a point's scenario at one arrival rate, simulated and judged
against the SLOs."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim_core.config import parse_config
from sim_core.engine.simulation import run_simulation
from sim_core.errors import SimulationError
from sim_core.sweep.spec import set_path

KEPT = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tbt_p50_s", "tbt_p90_s", "tbt_p99_s", "e2e_p50_s",
        "e2e_p90_s", "e2e_p99_s", "scheduling_delay_p99_s", "throughput_rps", "output_tokens_per_s",
        "num_preemptions", "kv_utilization_mean", "num_rejected")
REJECTED = "rejected requests"


@dataclass(frozen=True)
class Probe:
    """The verdict at one rate.

    Attributes:
        qps: the arrival rate tried (req/s).
        passed: every SLO met and every request served.
        metrics: the run's figures (KEPT; None where a run has no sample, e.g. no TBT gaps).
        violated: what failed, worst first: SLO keys by value / limit, REJECTED when requests
            were not served, or "simulation error: ..." when the policy could not go on.
    """

    qps: float
    passed: bool
    metrics: dict
    violated: tuple[str, ...]

    def to_json(self) -> list:
        return [self.qps, self.passed, self.metrics, list(self.violated)]


def probe_scenario(scenario: dict, qps: float, num_requests: int) -> dict:
    """The scenario at arrival rate `qps` with `num_requests` requests, keeping per-request rows only.

    A trace keeps its first `num_requests` rows and has its arrival times rescaled to the rate
    (`workload.target_qps`); a synthetic workload gets its process's rate parameters scaled so
    that its mean rate is `qps` (poisson/gamma: qps; bursty: qps and off_qps; diurnal: qps or
    the rate curve)."""
    scenario = set_path(scenario, "engine.record", "requests")
    workload = scenario["workload"]
    if workload.get("trace_file"):
        scenario = set_path(scenario, "workload.max_trace_requests", num_requests)
        return set_path(scenario, "workload.target_qps", qps)
    scenario = set_path(scenario, "workload.num_requests", num_requests)
    arrival = dict(workload["arrival"])
    factor = qps / _mean_rate(arrival)
    if arrival["process"] == "bursty":
        arrival["off_qps"] = arrival["off_qps"] * factor
    if arrival.get("rate_curve"):
        arrival["rate_curve"] = [rate * factor for rate in arrival["rate_curve"]]
    arrival["qps"] = arrival["qps"] * factor if arrival["process"] == "bursty" else qps
    return set_path(scenario, "workload.arrival", arrival)


def _mean_rate(arrival: dict) -> float:
    if arrival["process"] == "bursty":
        on, off = arrival["on_s"], arrival["off_s"]
        return (arrival["qps"] * on + arrival["off_qps"] * off) / (on + off)
    if arrival["process"] == "diurnal" and arrival.get("rate_curve"):
        return sum(arrival["rate_curve"]) / len(arrival["rate_curve"])
    return arrival["qps"]


def run_probe(scenario: dict, qps: float, slo: dict, num_requests: int) -> Probe:
    """Simulate the point at `qps` and judge it.

    Raises:
        ConfigError, TraceError: the point cannot run at any rate (e.g. the model does not fit).
    """
    config = parse_config(probe_scenario(scenario, qps, num_requests), source=f"probe at {qps:g} req/s")
    try:
        summary = run_simulation(config).summary
    except SimulationError as error:
        return Probe(qps, False, {}, (f"simulation error: {error}",))
    return judge(qps, summary, slo)


def judge(qps: float, summary: dict, slo: dict) -> Probe:
    """Pass when no request was rejected and every SLO metric is at or below its limit (a metric
    without samples, e.g. TBT when every request has one output token, cannot fail)."""
    metrics = {key: _finite(summary[key]) for key in KEPT}
    over = [key for key, limit in slo.items() if metrics[key] is not None and metrics[key] > limit]
    over.sort(key=lambda key: metrics[key] / slo[key], reverse=True)
    violated = ([REJECTED] if summary["num_rejected"] else []) + over
    return Probe(qps, not violated, metrics, tuple(violated))


def _finite(value: float) -> float | None:
    if isinstance(value, int):
        return value
    return float(value) if math.isfinite(value) else None
