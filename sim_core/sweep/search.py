"""Capacity search: the highest arrival rate at which a configuration meets its SLOs.

A bracketing search on the rate, as Vidur-Search does, with geometric steps:

1. probe qps_max; if it passes, the capacity is at least qps_max and the search stops;
2. guess the capacity as the throughput measured at qps_max (a saturated system serves about
   its service rate) and probe it, halving the rate until a probe passes (at qps_min, a
   failure means capacity 0);
3. bisect geometrically between the highest passing and the lowest failing rate until the
   failing one is within `tolerance` above the passing one.

Invariant after step 2: `low` passed and `high` failed, low < high. The answer is `low`; the
binding SLO is the worst violation at `high`. A rate that passes is assumed to mean every lower
rate passes (the search, like Vidur's, does not check monotonicity).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sim_core.errors import ConfigError
from sim_core.export.text import shorten
from sim_core.sweep.probe import Probe, run_probe
from sim_core.sweep.spec import SearchSettings

NO_LIMIT = "none (meets the SLOs at qps_max)"


@dataclass(frozen=True)
class Capacity:
    """The search's answer for one configuration.

    Attributes:
        max_qps: highest rate that met every SLO (0 when even qps_min failed or it cannot run).
        binding_slo: the SLO that failed just above max_qps, NO_LIMIT, or "infeasible: ..." when
            the configuration cannot run at any rate.
        probes: every probe, in the order made.
        at_capacity: the metrics of the probe at max_qps (None when max_qps is 0).
    """

    max_qps: float
    binding_slo: str
    probes: tuple[Probe, ...]
    at_capacity: dict | None

    def to_json(self) -> dict:
        return {"max_qps": self.max_qps, "binding_slo": self.binding_slo, "at_capacity": self.at_capacity,
                "probes": [probe.to_json() for probe in self.probes]}


Evaluate = Callable[[float], Probe]


def capacity_search(scenario: dict, slo: dict, settings: SearchSettings) -> Capacity:
    """Search the capacity of one scenario by simulating it (see the module docstring)."""
    return bracket_search(lambda qps: run_probe(scenario, qps, slo, settings.num_requests), settings)


def bracket_search(evaluate: Evaluate, settings: SearchSettings) -> Capacity:
    """The search over any rate -> Probe function (tests pass one with a known capacity)."""
    probes: list[Probe] = []

    def probe(qps: float) -> Probe:
        probes.append(evaluate(qps))
        return probes[-1]
    try:
        top = probe(settings.qps_max)
        if top.passed:
            return Capacity(top.qps, NO_LIMIT, tuple(probes), top.metrics)
        low, high = _bracket(probe, top, settings)
        if low is None:
            return Capacity(0.0, high.violated[0], tuple(probes), None)
        while high.qps > low.qps * (1.0 + settings.tolerance):
            middle = probe(math.sqrt(low.qps * high.qps))
            low, high = (middle, high) if middle.passed else (low, middle)
    except ConfigError as error:          # the configuration cannot run (e.g. the model does not fit)
        return Capacity(0.0, f"infeasible: {shorten(error, 500)}", tuple(probes), None)
    return Capacity(low.qps, high.violated[0], tuple(probes), low.metrics)


def _bracket(probe: Callable[[float], Probe], top: Probe, settings: SearchSettings) -> tuple[Probe | None, Probe]:
    """(highest passing probe or None, lowest failing probe): from the guess down by halves."""
    high, qps = top, _first_guess(top, settings)
    while True:
        attempt = probe(qps)
        if attempt.passed:
            return attempt, high
        high = attempt
        if qps <= settings.qps_min:
            return None, high
        qps = max(qps / 2.0, settings.qps_min)


def _first_guess(top: Probe, settings: SearchSettings) -> float:
    """The throughput served while overloaded at qps_max, or the geometric middle of the range."""
    served = top.metrics.get("throughput_rps")
    if served is None or served >= settings.qps_max:
        return math.sqrt(settings.qps_min * settings.qps_max)
    return max(served, settings.qps_min)
