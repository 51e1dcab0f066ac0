"""Exact reuse of probes across configurations that differ only in `scheduler.batch_size_cap`.

A sweep over batch caps searches the same configuration once per cap, but where the cap never
limited a run, the run at another cap is the same run. `ProbeMemo` keeps each probe a group's
searches made with a certificate, and replays it for another cap of the group only where the
certificate proves that the simulation at that cap takes every decision the same way:

* The engine reads the cap (on the audited policies, without P/D, data parallelism or prefix
  caching: `cap_limits`) only in these checks (`tests/test_sweep_cap_reuse.py` fails when a new
  reader appears in the engine or the schedulers):
  - vllm and sarathi (`paged`): a request joins only while `num_holders == cap` is false and the
    batch holds fewer than `cap // PP`; decodes are taken up to `cap // PP`;
  - orca and faster_transformer (`reserving`): a batch takes at most `max_batch_size` =
    min(planner's max batch, cap) requests (`engine/simulation.py::replica_limits`);
  - the memory plan (the detailed and vllm planners size activations by the cap: compared whole,
    every `ReplicaLimits` field but `max_batch_size` must be equal) and the run budget (its
    estimate, `engine/cost_estimate.py`, counted with the cap: checked at the replayed cap, below).
* Every request a batch holds holds KV memory, so a batch never holds more than the replica's
  holders, and `probe.peak_holders` bounds the holders of the whole run (H).
* Two runs that differ only in the cap start in one state; at each check the holders compared
  are at most H. If H < min(cap_a, cap_b) // PP (paged), or the two `max_batch_size` are equal
  or both above H (reserving), every check comes out the same in both runs, so by induction over
  the run's decisions they stay in one state: the same requests, times and metrics, the same
  probe. The same cap is the same scenario.

The run budget: the replay still parses the probe's scenario at its own cap, checks the budget
on the probe's requests (raising as the run would) and requires its memory watch's base (the
bytes the run commits before its rows) to be no larger than that of the run it replays, whose
rows (the same run's) then stay under the same limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from sim_core.config import SimulationConfig, parse_config
from sim_core.engine.budget import CostEstimate, check_budget
from sim_core.engine.simulation import CLI_LIMITS, replica_limits
from sim_core.errors import ConfigError
from sim_core.schedulers import ReplicaLimits
from sim_core.sweep.probe import Probe, measured_probe, probe_inputs
from sim_core.sweep.spec import SearchSettings

# how each audited policy reads the cap (see the module docstring)
CAP_READERS = {"vllm": "paged", "sarathi": "paged", "orca": "reserving", "faster_transformer": "reserving"}


@dataclass(frozen=True)
class CapLimits:
    """What the batch cap decides in one scenario's runs.

    Attributes:
        reader: how the policy reads the cap (CAP_READERS).
        cap: scheduler.batch_size_cap.
        num_stages: pipeline stages (the micro-batch cap is cap // num_stages).
        limits: the replica's limits (`max_batch_size` = min(planner's max batch, cap)).
    """

    reader: str
    cap: int
    num_stages: int
    limits: ReplicaLimits


def cap_limits(config: SimulationConfig) -> CapLimits | None:
    """The cap's role in `config`'s runs, or None where reuse is not audited (another policy,
    P/D, data parallelism, prefix caching) or the configuration cannot run."""
    sched = config.scheduler
    reader = CAP_READERS.get(sched.type)
    if (reader is None or config.disaggregation.enabled or (config.cluster.data_parallel_size or 1) != 1
            or sched.prefix_caching()):
        return None
    try:
        limits = replica_limits(config)[1]
    except ConfigError:
        return None
    return CapLimits(reader, sched.batch_size_cap, config.cluster.pipeline_parallel_size, limits)


def same_run(ran: CapLimits, peak: int | None, other: CapLimits) -> bool:
    """Whether a run made under `ran`, whose replicas held at most `peak` requests at once, is
    the run `other` makes (the certificate of the module docstring)."""
    if ran == other:
        return True
    if (peak is None or ran.reader != other.reader or ran.num_stages != other.num_stages
            or replace(ran.limits, max_batch_size=0) != replace(other.limits, max_batch_size=0)):
        return False
    if ran.reader == "paged":
        return peak < min(ran.cap, other.cap) // ran.num_stages
    first, second = ran.limits.max_batch_size, other.limits.max_batch_size
    return first == second or peak < min(first, second)


@dataclass(frozen=True)
class _Ran:
    """A probe simulated under `limits`, its holders' bound and its run budget's base."""

    limits: CapLimits
    peak: int | None
    watch_base: int
    probe: Probe


class ProbeMemo:
    """run_probe for the searches of one group of configurations that differ only in the batch
    cap (`group_key`): replays a probe made at another cap when `same_run` proves it identical.

    Attributes:
        simulated, replayed: probes simulated and replayed so far.
    """

    def __init__(self) -> None:
        self._runs: dict[tuple[str, float, int, int], list[_Ran]] = {}
        self._limits: dict[str, CapLimits | None] = {}
        self.simulated = 0
        self.replayed = 0

    def run(self, scenario: dict, qps: float, slo: dict, settings: SearchSettings, repeat: int = 0,
            length: int = 1) -> Probe:
        """run_probe's probe (the same arguments and errors), replayed when proved identical."""
        group = group_key(scenario) + json.dumps([slo, settings.model_dump()], sort_keys=True)
        limits = self._cap_limits(scenario)
        runs = self._runs.setdefault((group, qps, repeat, length), [])
        if limits is None:
            probe = measured_probe(scenario, qps, slo, settings, repeat, length)[0]
            self.simulated += 1
            return probe
        inputs = probe_inputs(scenario, qps, settings, repeat, length)   # raises as the run would
        base = _watch_base(check_budget(inputs[0], CLI_LIMITS, inputs[1]))   # as the run's second check
        ran = next((ran for ran in runs if same_run(ran.limits, ran.peak, limits) and base <= ran.watch_base), None)
        if ran is not None:
            self.replayed += 1
            return ran.probe
        probe, peak = measured_probe(scenario, qps, slo, settings, repeat, length, inputs)
        self.simulated += 1
        runs.append(_Ran(limits, peak, base, probe))
        return probe

    def _cap_limits(self, scenario: dict) -> CapLimits | None:
        key = json.dumps(scenario, sort_keys=True)
        if key not in self._limits:
            self._limits[key] = cap_limits(parse_config(scenario, source="sweep point"))
        return self._limits[key]


def _watch_base(estimate: CostEstimate) -> int:
    """What `engine/run_watch.py::MemoryWatch` counts before the run's rows."""
    return estimate.committed_bytes - estimate.parts.get("block_events", 0)


def group_key(scenario: dict) -> str:
    """The scenario without its batch cap (canonical JSON): configurations with one key differ
    at most in the cap."""
    sched = {key: value for key, value in scenario.get("scheduler", {}).items() if key != "batch_size_cap"}
    return json.dumps({**scenario, "scheduler": sched}, sort_keys=True)


def cap_order(scenarios: list[dict]) -> list[int]:
    """Indices of `scenarios`, largest batch cap first (a run at a large cap certifies the
    smaller caps its holders stayed under)."""
    return sorted(range(len(scenarios)), key=lambda i: -int(scenarios[i].get("scheduler", {}).get("batch_size_cap", 0)))
