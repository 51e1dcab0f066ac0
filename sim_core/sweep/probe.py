"""One probe of the capacity search: a point's scenario at one arrival rate, simulated long enough
to reach a steady state (`num_requests` per replica) and judged on a window that leaves out the
warm-up and the drain: against the SLOs, and against the offered rate (an overloaded system fails
whatever its percentiles)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from sim_core.config import SimulationConfig, parse_config
from sim_core.engine.budget import check_budget
from sim_core.engine.cost_estimate import MIB, count_rows
from sim_core.engine.simulation import CLI_LIMITS, run_simulation
from sim_core.errors import SimulationError
from sim_core.results.metrics import PERCENTILES, quantiles
from sim_core.sweep.goodput import attainment
from sim_core.sweep.resample import resample_rows
from sim_core.sweep.spec import ATTAINMENT, SLO_METRICS, SearchSettings, set_path
from sim_core.workload import build_workload
from sim_core.workload.transforms import rescale_time

if TYPE_CHECKING:
    import pandas as pd

    from sim_core.workload.model import Workload

KEPT = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tbt_p50_s", "tbt_p90_s", "tbt_p99_s", "e2e_p50_s",
        "e2e_p90_s", "e2e_p99_s", "scheduling_delay_p99_s", "throughput_rps", "served_rps", "offered_rps",
        "backlog_growth",
        "slo_attainment", "output_tokens_per_s",
        "num_preemptions", "kv_utilization_mean", "num_rejected")
REJECTED = "rejected requests"
OVERLOADED = "overloaded"
# a probe is overloaded when over its measurement window the backlog grew as if it served less
# than this share of what arrived: the queue grows without bound, whatever the percentiles say
SERVED_SHARE = 0.97
# an overload within this many standard deviations of what the backlog's own fluctuation leaves
# unserved on a server that keeps up is doubtful (`doubtful_overload`; search version 8)
SHORTFALL_SIGMAS = 2.0
# routers whose choices the seed draws (`reseed_replays`)
DRAWING_ROUTERS = ("random", "power_of_two")


@dataclass(frozen=True)
class Probe:
    """The verdict at one rate.

    Attributes:
        qps: the arrival rate tried (req/s).
        passed: every SLO met, every request served, and not overloaded.
        metrics: the run's figures (KEPT and `backlog_spread`; None where a run has no sample,
            e.g. no TBT gaps),
            measured over the steady-state window (see `steady_summary`).
        violated: what failed, worst first: REJECTED when requests were not served, OVERLOADED
            when the window's backlog grew (`_overloaded`), except where SLO limits failed too
            and the shortfall lies within the backlog's fluctuation (`judge`), SLO keys by
            value / limit (with slo.attainment: "slo_attainment"), or "simulation error: ..."
            when the policy could not go on.
        repeat: 0 for the search's own seed; k for the k-th reseeded repeat.
        length: the probe's requests as a multiple of search.num_requests (the confirming
            probes: search.confirm_length).
    """

    qps: float
    passed: bool
    metrics: dict
    violated: tuple[str, ...]
    repeat: int = 0
    length: int = 1

    def to_json(self) -> list:
        return [self.qps, self.passed, self.metrics, list(self.violated), self.repeat, self.length]


def num_probe_requests(scenario: dict, per_replica: int) -> int:
    """Requests of a probe: `per_replica` for every scheduling replica of the cluster (each
    data-parallel rank is one; of both pools when disaggregated), so that each sees as many
    whatever the cluster's size."""
    pools = scenario.get("disaggregation") or {}
    if pools.get("enabled"):
        return per_replica * (pools["prefill"]["num_replicas"] + pools["decode"]["num_replicas"])
    cluster = scenario["cluster"]
    return per_replica * cluster["num_replicas"] * int(cluster.get("data_parallel_size") or 1)


def probe_scenario(scenario: dict, qps: float, num_requests: int, repeat: int = 0) -> dict:
    """The scenario at arrival rate `qps` with `num_requests` requests, keeping per-request rows
    only; `repeat` k > 0 adds k to the seed (the workload's, when it has its own).

    A trace keeps its first `num_requests` rows and has its arrival times rescaled to the rate
    (`workload.target_qps`; `probe_workload` resamples a trace shorter than the search's longest
    probe); a synthetic workload gets its process's rate parameters scaled so
    that its mean rate is `qps` (poisson/gamma: qps; bursty: qps and off_qps; diurnal: qps or
    the rate curve)."""
    scenario = set_path(scenario, "engine.record", "requests")
    if repeat:
        own = scenario["workload"].get("seed")
        scenario = (set_path(scenario, "seed", (scenario["seed"] + repeat) % 2**32) if own is None
                    else set_path(scenario, "workload.seed", (own + repeat) % 2**32))
    workload = scenario["workload"]
    if workload.get("trace_file"):
        scenario = set_path(scenario, "workload.max_trace_requests", num_requests)
        return set_path(scenario, "workload.target_qps", qps)
    scenario = set_path(scenario, "workload.num_requests", num_requests)
    arrival = dict(workload["arrival"])
    factor = qps / mean_rate(arrival)
    if arrival["process"] == "bursty":
        arrival["off_qps"] = arrival["off_qps"] * factor
    if arrival.get("rate_curve"):
        arrival["rate_curve"] = [rate * factor for rate in arrival["rate_curve"]]
    arrival["qps"] = arrival["qps"] * factor if arrival["process"] == "bursty" else qps
    return set_path(scenario, "workload.arrival", arrival)


def mean_rate(arrival: dict) -> float:
    """The mean arrival rate (req/s) of a synthetic arrival section (bursty: time-weighted over
    its on and off periods; diurnal: the mean of its rate curve)."""
    if arrival["process"] == "bursty":
        on, off = arrival["on_s"], arrival["off_s"]
        return (arrival["qps"] * on + arrival["off_qps"] * off) / (on + off)
    if arrival["process"] == "diurnal" and arrival.get("rate_curve"):
        return sum(arrival["rate_curve"]) / len(arrival["rate_curve"])
    return arrival["qps"]


def run_probe(scenario: dict, qps: float, slo: dict, settings: SearchSettings, repeat: int = 0,
              length: int = 1) -> Probe:
    """Simulate the point at `qps` (`repeat`: see probe_scenario) with `length` x
    search.num_requests requests per replica and judge its steady state.

    Raises:
        ConfigError, TraceError: the point cannot run at any rate (e.g. the model does not fit).
    """
    return measured_probe(scenario, qps, slo, settings, repeat, length)[0]


def probe_inputs(scenario: dict, qps: float, settings: SearchSettings, repeat: int = 0,
                 length: int = 1) -> tuple[SimulationConfig, Workload]:
    """The probe's scenario and requests, the requests built only once the scenario alone passes
    the run budget (raising what run_simulation's first check raises)."""
    num_requests = num_probe_requests(scenario, settings.num_requests * length)
    config = parse_config(probe_scenario(scenario, qps, num_requests, repeat), source=f"probe at {qps:g} req/s")
    check_budget(config, CLI_LIMITS)      # from the scenario alone, before generating its requests
    return config, probe_workload(config, num_requests, num_probe_requests(scenario, settings.longest_probe))


def measured_probe(scenario: dict, qps: float, slo: dict, settings: SearchSettings, repeat: int = 0,
                   length: int = 1, inputs: tuple[SimulationConfig, Workload] | None = None
                   ) -> tuple[Probe, int | None]:
    """run_probe's probe and the most requests any replica held at once (`peak_holders`; None
    when the simulation stopped with an error): what `sweep/reuse.py` certifies reuse with.
    `inputs`: the probe's `probe_inputs`, when the caller has built them already."""
    config, workload = inputs or probe_inputs(scenario, qps, settings, repeat, length)
    try:
        result = run_simulation(config, workload, gap_window=gap_window(config, workload, settings.warmup))
    except SimulationError as error:
        return Probe(qps, False, {}, (f"simulation error: {error}",), repeat, length), None
    probe = judge(qps, steady_summary(result.requests, result.summary, settings.warmup, slo), slo)
    return replace(probe, repeat=repeat, length=length), peak_holders(result.requests)


def peak_holders(requests: pd.DataFrame) -> int:
    """An upper bound on the requests one replica held KV memory for at once: the most closed
    intervals [scheduled_at, completed_at] of one replica that share an instant. A request holds
    memory from its first admission (`scheduled_at`, the formation that admitted it; a restart
    keeps it) to its completion, so the interval covers every time it held some; counting an
    interval that ends at the instant another starts as overlapping leaves the order of events
    at one instant (a completion freed before or after a formation) out of the bound. A request
    never scheduled held nothing; one scheduled and never completed holds to the end."""
    scheduled = requests["scheduled_at"].to_numpy(np.float64)
    completed = requests["completed_at"].to_numpy(np.float64)
    replica = requests["replica_id"].to_numpy()
    held = np.isfinite(scheduled) & (scheduled >= 0.0)
    completed = np.where(np.isfinite(completed), completed, np.inf)
    peak = 0
    for rid in np.unique(replica[held]):
        mine = held & (replica == rid)
        times = np.concatenate((scheduled[mine], completed[mine]))
        steps = np.concatenate((np.ones(int(mine.sum()), np.int64), -np.ones(int(mine.sum()), np.int64)))
        order = np.lexsort((-steps, times))   # at one instant the starts (+1) come before the ends
        peak = max(peak, int(np.cumsum(steps[order]).max()))
    return peak


def probe_workload(config: SimulationConfig, num_requests: int, longest: int = 0) -> Workload:
    """The probe's requests. A trace with fewer rows than the search's longest probe (`longest`
    requests, the confirming one's; 0: this probe's) is resampled to `num_requests` at every
    probe length, so that short and long probes deal requests from one distribution, the
    trace's whole; a trace at least that long keeps its first `num_requests` rows (every probe a
    prefix of the longest).

    Playing a short trace's first rows in order made the short probes judge one window of it
    (code.csv's first 400 rows fail TBT p99 at 0.571 req/s where 10,000 resampled requests pass:
    bench/README.md, "Capacity search accuracy"), while the long probes resampled it."""
    spec = config.workload
    if not spec.trace_file:
        return build_workload(config)
    longest = max(longest, num_requests)
    # the trace's first `longest` rows, read once, before its time scaling: the first
    # `num_requests` of them are then scaled as the transforms would scale them alone
    read = build_workload(config.model_copy(update={"workload": spec.model_copy(
        update={"max_trace_requests": longest, "target_qps": None, "time_scale_factor": 1.0})}))
    if len(read) >= longest:
        return rescale_time(read.take(np.arange(num_requests)), spec.time_scale_factor, spec.target_qps)
    return resample_rows(rescale_time(read, spec.time_scale_factor, spec.target_qps), num_requests,
                         config.seed if spec.seed is None else spec.seed)


def reseed_replays(scenario: dict, settings: SearchSettings) -> bool:
    """Whether a probe reseeded (`repeat` k > 0) replays the probe it repeats exactly: its
    workload is a trace at least the search's longest probe long (every probe deals the same
    prefix of it: `probe_workload`), routed without random draws (one scheduling replica, or a
    router that draws none) and without drawn think times: the seed then feeds nothing."""
    config = parse_config(scenario, source="capacity search")
    spec = config.workload
    if not spec.trace_file or (spec.sessions.closed_loop and spec.sessions.closed_loop_gap == "think_time"):
        return False
    scheduling = num_probe_requests(scenario, 1)
    if scheduling > 1 and (config.cluster.global_scheduler in DRAWING_ROUTERS or config.disaggregation.enabled):
        return False
    longest = num_probe_requests(scenario, settings.longest_probe)
    return count_rows(spec.trace_file, spec.max_trace_mb * MIB) >= longest


def gap_window(config: SimulationConfig, workload: Workload, warmup: float) -> tuple[float, float] | None:
    """The steady-state window in which token gaps count towards TBT: from the arrival of the
    first request after the `warmup` share of them to the last arrival, as `steady_summary`
    judges TTFT and e2e (None, all gaps, for closed-loop sessions, whose later turns arrive
    only when the run releases them)."""
    arrived = np.sort(np.asarray(workload.arrived_at, dtype=np.float64))
    if config.workload.sessions.closed_loop or len(arrived) < 2:
        return None
    return float(arrived[int(warmup * (len(arrived) - 1))]), float(arrived[-1])


def steady_summary(requests: pd.DataFrame, summary: dict, warmup: float, slo: dict | None = None) -> dict:
    """The run's summary measured over its steady-state window: from the arrival of the first
    request after the `warmup` share of them to the last arrival (the drain after it is left
    out). TTFT, e2e and scheduling-delay percentiles are those of the requests arriving in the
    window; `throughput_rps` is the completions in the window over its length, `offered_rps`
    the arrivals, `backlog_growth` see _backlog_growth, `backlog_spread` see _backlog_spread,
    `slo_attainment` the share of the
    window's requests meeting every limit of `slo` (sweep/goodput.py), `served_rps` the whole
    run's completions over its makespan (an overloaded run's service rate). TBT percentiles are the
    summary's: a probe counts only the token gaps ending inside the window (`gap_window`)."""
    arrived = np.sort(requests["arrived_at"].to_numpy())
    if len(arrived) < 2:
        return {**summary, "offered_rps": None, "backlog_growth": None, "backlog_spread": None,
                "slo_attainment": attainment(requests, slo) if slo else None}
    start, end = float(arrived[int(warmup * (len(arrived) - 1))]), float(arrived[-1])
    if end <= start:
        return {**summary, "offered_rps": None, "backlog_growth": None, "backlog_spread": None,
                "slo_attainment": attainment(requests, slo) if slo else None}
    window = requests[requests["arrived_at"] >= start]
    finished = window[window["status"] == "finished"]
    steady = {**summary, "served_rps": summary["throughput_rps"]}
    for name in ("ttft", "e2e", "scheduling_delay"):
        for p, value in zip(PERCENTILES, quantiles(finished[name].to_numpy(), PERCENTILES)):
            steady[f"{name}_p{p}_s"] = value
    completed = requests["completed_at"].to_numpy()
    steady["throughput_rps"] = float(np.count_nonzero((completed > start) & (completed <= end))) / (end - start)
    steady["offered_rps"] = float(np.count_nonzero((arrived > start) & (arrived <= end))) / (end - start)
    steady["slo_attainment"] = attainment(window, slo) if slo else None
    backlog = _backlog(arrived, np.sort(completed[np.isfinite(completed)]), start, end)
    steady["backlog_growth"] = _backlog_growth(*backlog, start, end)
    steady["backlog_spread"] = _backlog_spread(*backlog)
    return steady


def _backlog(arrived: np.ndarray, completed: np.ndarray, start: float, end: float) -> tuple[np.ndarray, np.ndarray]:
    """(the window's arrival times, the backlog, arrived and not completed, each of them sees
    counting itself) from the sorted arrival and completion times."""
    inside = arrived[(arrived >= start) & (arrived <= end)]
    backlog = np.arange(1, len(arrived) + 1)[np.searchsorted(arrived, inside, side="right") - 1] \
        - np.searchsorted(completed, inside, side="right")
    return inside, backlog


def _backlog_growth(inside: np.ndarray, backlog: np.ndarray, start: float, end: float) -> float:
    """How much the backlog (seen at the window's arrivals `inside`) grew over the window, as a
    share of the requests arriving in half of it: its mean over the window's second half minus
    its mean over the first (Poisson arrivals see time averages). A queue growing at rate
    arrivals - completions gives 1 - completions / arrivals; a stable one about 0 (the means
    smooth out the bursts in which a batch completes its requests)."""
    second = inside > (start + end) / 2
    if second.all() or not second.any():
        return 0.0
    return float(backlog[second].mean() - backlog[~second].mean()) / (len(inside) / 2)


def _backlog_spread(inside: np.ndarray, backlog: np.ndarray) -> float:
    """The backlog's standard deviation about its least-squares line in time over the window, as
    a share of the window's arrivals: how far one look at a backlog that only fluctuates (the
    trend taken out, whatever it is) strays from the trend: one look's deviation, in the units of
    `_overloaded`'s shortfall (two looks differ by sqrt(2) times it: `_within_fluctuation`). 0
    with fewer than three arrivals."""
    if len(inside) < 3 or inside[-1] <= inside[0]:
        return 0.0
    slope, intercept = np.polyfit(inside - inside[0], backlog.astype(np.float64), 1)
    residual = backlog - (intercept + slope * (inside - inside[0]))
    return float(np.sqrt(np.mean(residual * residual))) / len(inside)


def judge(qps: float, summary: dict, slo: dict) -> Probe:
    """Pass when no request was rejected, the window is not overloaded (`_overloaded`, when
    measured), and every SLO metric is at or below its limit (a metric without
    samples, e.g. TBT when every request has one output token, cannot fail). A probe that fails
    its limits is not called overloaded as well when the shortfall lies within the backlog's
    fluctuation (`doubtful_overload`): its verdict then rests on the limits, which say how far
    it is from them (`severity`) for the search to aim with (search version 8)."""
    metrics = {key: _finite(summary.get(key)) for key in (*KEPT, "backlog_spread")}
    if ATTAINMENT in slo:
        share = metrics["slo_attainment"]
        over = ["slo_attainment"] if share is not None and share < slo[ATTAINMENT] else []
    else:
        over = [key for key, limit in slo.items() if metrics[key] is not None and metrics[key] > limit]
        over.sort(key=lambda key: metrics[key] / slo[key], reverse=True)
    # an overload within the backlog's fluctuation is left to the SLOs when they fail anyway
    overloaded = _overloaded(summary) and not (over and _within_fluctuation(metrics))
    violated = ([REJECTED] if summary["num_rejected"] else []) + ([OVERLOADED] if overloaded else []) + over
    return Probe(qps, not violated, metrics, tuple(violated))


def _overloaded(summary: dict) -> bool:
    """The window's backlog grew (its mean over the second half above the first by more than
    1 - SERVED_SHARE of the arrivals) and its completions fell short of its arrivals by as much.
    Both must hold: a trace whose own arrival rate rises over the window raises the backlog's
    second-half mean on a server that keeps up, but then completions keep pace with arrivals;
    an overloaded server fails both (each is then about 1 - completions / arrivals)."""
    growth, served, offered = (summary.get(key) for key in ("backlog_growth", "throughput_rps", "offered_rps"))
    if growth is None or served is None or not offered:
        return False
    return growth > 1.0 - SERVED_SHARE and served < SERVED_SHARE * offered


def doubtful_overload(probe: Probe) -> bool:
    """The probe failed on overload alone, and its shortfall (1 - completions / arrivals in the
    window) lies within SHORTFALL_SIGMAS standard deviations of 1 - SERVED_SHARE, the deviation
    being what the backlog's own fluctuation leaves unserved on a server that keeps up: the
    search then asks a reseeded probe (search.py, `bracket_search`).

    The shortfall is the backlog's change from the window's start to its end: on a server that
    keeps up, the difference of two looks at a fluctuating backlog, whose standard deviation is
    sqrt(2) x its spread (`_backlog_spread`, its scatter about the window's trend). Chat's
    500-row trace on one replica holds 25-45 requests at 0.75-0.97 of its capacity, scattered by
    6-7.5 about the trend: in a 320-request window that alone fails the overload test one time
    in eight (at 0.75) to one in four (at 0.97), while an overloaded server's backlog climbs its
    trend, a random walk with drift whose scatter about it, as a share of the window's arrivals,
    shrinks only as 1 / sqrt(the window's arrivals), as does its shortfall's own noise: a
    100-400-request window of a Poisson server overloaded by 5-20% can look as if it kept up
    (bench/README.md, "search version 9"). A stable backlog's deviation shrinks as 1 / the
    window's arrivals; an overloaded one's as 1 / sqrt of them: a confirming probe, four times
    longer, is judged at least twice as finely."""
    return probe.violated == (OVERLOADED,) and _within_fluctuation(probe.metrics)


def _within_fluctuation(metrics: dict) -> bool:
    """The window's shortfall lies within SHORTFALL_SIGMAS standard deviations of the backlog's
    fluctuation above 1 - SERVED_SHARE (see doubtful_overload)."""
    served, offered, spread = (metrics.get(key) for key in ("throughput_rps", "offered_rps", "backlog_spread"))
    if served is None or not offered or spread is None:
        return False
    return 1.0 - served / offered - SHORTFALL_SIGMAS * math.sqrt(2.0) * spread <= 1.0 - SERVED_SHARE


def pooled_overloaded(first: dict, again: dict) -> bool:
    """Whether two windows of one rate (`first` a doubtful overload, `again` its reseeded probe),
    pooled as one window twice as long, fail `_overloaded`'s test: their mean backlog growth and
    mean shortfall (1 - completions / arrivals) both above 1 - SERVED_SHARE. A server that keeps
    up passes it about as often as each window alone; an overloaded one whose reseeded window
    happened to keep up is still caught when its doubtful window's excess outweighs it (search
    version 9; bench/README.md, "search version 9"). False when either lacks those metrics."""
    growths, shortfalls = [], []
    for metrics in (first, again):
        growth, served, offered = (metrics.get(key) for key in ("backlog_growth", "throughput_rps", "offered_rps"))
        if growth is None or served is None or not offered:
            return False
        growths.append(growth)
        shortfalls.append(1.0 - served / offered)
    return min(sum(growths), sum(shortfalls)) / 2.0 > 1.0 - SERVED_SHARE


def severity(probe: Probe, slo: dict) -> float | None:
    """How far the probe is from its SLO limits: the largest metric / limit (at most 1 when it
    meets them), for the search to interpolate the rate where it reaches 1. None when that ratio
    does not decide the verdict: rejected, overloaded or failed runs, an attainment criterion, or
    no metric with a sample (e.g. TBT with one output token each)."""
    if ATTAINMENT in slo or not probe.metrics or any(v not in SLO_METRICS for v in probe.violated):
        return None
    ratios = [probe.metrics[key] / limit for key, limit in slo.items() if probe.metrics.get(key) is not None]
    return max(ratios) if ratios and max(ratios) > 0.0 else None


def _finite(value: float | None) -> float | None:
    if value is None or isinstance(value, int):
        return value
    return float(value) if math.isfinite(value) else None
