"""The current configuration's capacity where this session's sweep has found it: shown under the
rate box in the sidebar and on the Overview, which can also start a search of this configuration
alone (a one-point sweep, run like the Capacity page's)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from explorer.capacity_jobs import current_job, show_start_error, start_clicked
from sim_core import SimCoreError, parse_config
from sim_core.sweep.probe import mean_rate
from sim_core.sweep.search import NO_LIMIT

DEFAULT_SLO = {"ttft_p90_s": 2.0, "tbt_p99_s": 0.2}   # the Capacity page's defaults
SEARCH_SETS = {"workload": ("num_requests", "max_trace_requests", "target_qps"),   # what a probe sets itself
               "workload.arrival": ("qps", "off_qps", "rate_curve")}
SLO_NAMES = {"ttft": "TTFT", "tbt": "TBT", "e2e": "E2E", "scheduling_delay": "queueing"}


@dataclass(frozen=True)
class KnownCapacity:
    """A sweep's answer for the configuration: its capacity (req/s), the range it lies in, the
    SLO that binds just above it and the SLOs it was searched with."""

    max_qps: float
    qps_range: tuple[float, float | None]
    binding_slo: str
    slo: dict[str, float]

    def slo_text(self) -> str:
        """'TTFT p90 <= 2 s, TBT p99 <= 0.2 s'."""
        parts = []
        for key, limit in self.slo.items():
            metric, _, rest = key.rpartition("_p")
            parts.append(f"{SLO_NAMES.get(metric, metric)} p{rest.removesuffix('_s')} <= {limit:g} s"
                         if metric else f"{key} {limit:g}")
        return ", ".join(parts)

    def share_text(self, qps: float) -> str:
        """How the rate `qps` compares with the capacity, in a few words."""
        if self.max_qps <= 0:
            return "no rate meets the SLOs"
        if self.binding_slo == NO_LIMIT:
            return f"meets the SLOs up to the search's highest rate, {self.max_qps:.3g} req/s"
        share = qps / self.max_qps
        return f"{qps:.3g} req/s is {share:.0%} of it" + (": over capacity" if share > 1.0 else "")


def configuration(dumped: dict) -> dict:
    """A validated scenario (every default spelled out) without what a capacity search sets
    itself: the arrival rate, the request count, the record level; nor its label."""
    data = {key: value for key, value in dumped.items() if key not in ("engine", "name")}
    workload = {key: value for key, value in data["workload"].items() if key not in SEARCH_SETS["workload"]}
    workload["arrival"] = {key: value for key, value in workload["arrival"].items()
                           if key not in SEARCH_SETS["workload.arrival"]}
    return {**data, "workload": workload}


def _configuration_of(scenario: dict) -> dict | None:
    """`configuration` of a scenario dict (None when it is not valid)."""
    try:
        return configuration(parse_config(scenario).model_dump(mode="json"))
    except SimCoreError:
        return None


def known_capacity(scenario: dict) -> KnownCapacity | None:
    """The capacity this session's last sweep found for the scenario's configuration (None when
    it has none, the scenario is not valid, or the sweep has not reached that point)."""
    job = current_job()
    target = _configuration_of(scenario)
    if job is None or target is None:
        return None
    records = {record["key"]: record for record in job.snapshot().records}
    for point in job.grid.points:
        record = records.get(point.key)
        if record is not None and not record.get("error") and configuration(point.scenario) == target:
            low, high = record.get("qps_range") or (record["max_qps"], None)
            return KnownCapacity(record["max_qps"], (low, high), record["binding_slo"], dict(job.spec.slo))
    return None


def searching(scenario: dict) -> bool:
    """Whether this session's sweep is running and covers the scenario's configuration."""
    job = current_job()
    if job is None or job.snapshot().status != "running":
        return False
    target = _configuration_of(scenario)
    return target is not None and any(configuration(point.scenario) == target for point in job.grid.points)


def offered_rate(scenario: dict, arrivals: np.ndarray | None = None) -> float | None:
    """The rate the (valid) scenario offers: a synthetic process's mean rate, a trace's measured
    over the run's `arrivals` (None without them)."""
    workload = parse_config(scenario).model_dump(mode="json")["workload"]   # defaults spelled out
    if not workload.get("trace_file"):
        return mean_rate(workload["arrival"])
    if arrivals is None or len(arrivals) < 2 or float(np.ptp(arrivals)) <= 0:
        return None
    return (len(arrivals) - 1) / float(np.ptp(arrivals))


def show_capacity(scenario: dict, arrivals: np.ndarray) -> None:
    """The Overview's capacity line: the capacity when known (and how the run's offered rate
    compares), a note while a search of this configuration runs (the page reruns when it
    ends), else a button that starts one."""
    known = known_capacity(scenario)
    offered_qps = offered_rate(scenario, arrivals)
    if known is not None:
        low, high = known.qps_range
        span = f" (between {low:.3g} and {high:.3g})" if high is not None and low > 0 else ""
        share = f"; {known.share_text(offered_qps)}" if offered_qps else ""
        st.info(f"Capacity of this configuration: {known.max_qps:.3g} req/s{span} within {known.slo_text()}{share}.",
                icon=":material/speed:")
    elif searching(scenario):
        st.info("Finding this configuration's capacity in the background (progress on the Capacity page)...",
                icon=":material/hourglass_top:")
        st.fragment(_rerun_when_done, run_every=1.0)()
    else:
        st.button("Find this configuration's capacity", key="ov_capacity", on_click=search_this, args=(scenario,),
                  help=f"Searches the highest arrival rate this configuration sustains within "
                       f"{KnownCapacity(0.0, (0.0, None), '', DEFAULT_SLO).slo_text()} in the background, as the "
                       "Capacity page does (it replaces that page's sweep); the rate box then shows it.")
        show_start_error()


def _rerun_when_done() -> None:
    job = current_job()
    if job is None or job.snapshot().status != "running":
        st.rerun()


def search_this(scenario: dict) -> None:
    """Start a search of the scenario's configuration alone with the Capacity page's default
    SLOs and search settings, in the background, replacing this session's previous sweep (a
    button callback: a refusal is shown by `capacity_jobs.show_start_error`)."""
    try:   # every default spelled out: a sweep would otherwise route with least_outstanding
        base = parse_config(scenario).model_dump(mode="json", exclude_none=True)
    except SimCoreError:
        base = scenario                    # start_clicked reports what is wrong
    start_clicked({"base": base, "vary": {}, "slo": dict(DEFAULT_SLO), "gpu_hour_usd": 2.5}, "local", "")
