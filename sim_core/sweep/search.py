"""Capacity search: the highest arrival rate at which a configuration meets its SLOs.

A bracketing search on the rate, as Vidur-Search does, with geometric steps:

1. probe qps_max; if it passes, the capacity is at least qps_max and the search stops;
2. guess the capacity as the rate served at qps_max (completions over the run's makespan: a
   saturated system serves about its service rate, the capacity's upper end) and probe it;
   on a failure step down by GUESS_STEPS, then by halves until a probe passes (at qps_min, a
   failure means capacity 0), except where the severities of the two lowest failures (see
   step 3) extrapolate to 1 at most halfway down: then to that rate, or one tolerance step down
   when it lies that close (`_step_down`); when that served-rate guess passes, the capacity
   lies just above it: step up by 1 + 2 x tolerance, squaring the step after each pass, until a
   probe fails (or the next step would reach qps_max, which failed);
3. narrow the bracket between the highest passing and the lowest failing rate until the failing
   one is within `tolerance` above the passing one (`_narrow`): by geometric bisection, or, when
   both ends measured how far they are from the SLO limits (`probe.severity`: the largest
   metric / limit, which a rejection or overload leaves undefined), at the rate where that ratio
   interpolates to 1 (linear in log rate and log ratio), moved to one tolerance step from an end
   when it lies that close, so that the next probe can close the bracket; a probe whose verdict
   the interpolation mispredicted is followed by a bisection, and so is a plain estimate that
   would follow another one; with confirmation (step 5), a probe expected to pass one
   tolerance step below the failing end is made long at once (passing, it is the answer);
4. without confirmation (step 5 off): repeat the probes at those two rates with `repeats`
   other seeds: the capacity lies in `qps_range`, from the highest rate that passed with every
   seed it was tried with to the lowest that failed with every one (the bracket when the seeds
   agree);
5. confirm the answer with one probe `confirm_length` times longer: a tail percentile (TBT p99)
   of a short probe is noisy and can pass a rate a long run fails. When the long probe fails,
   probe one tolerance step below it (a pass closes the bracket), then step down by 1 + 2 x
   tolerance, squaring the step after each failure, until one passes, and narrow that bracket
   with long probes to the tolerance (as in step 3). The long probes then decide: the answer is
   the highest rate a long probe passed, and `qps_range` runs from it to the lowest rate a long
   probe failed, or, when the first long probe passed, the short search's range above it: only
   then is the failing rate repeated with `repeats` other seeds (a repeat at the answer or,
   after a long failure, at the failing rate could move neither the answer nor the range: the
   long probes decide them).

Throughout steps 1-3, a short probe whose failure a short window's noise may have made (search
version 8: on overload alone within the backlog's own fluctuation, `probe.doubtful_overload`, or
on the SLO limits alone by a severity of at most DOUBTFUL_SEVERITY) is reseeded at once (seed +1,
the repeat that step 4 would make there): the rate passes when the reseeded probe passes and,
both having severities, their product is at most 1 (the two windows pooled, in log ratio), or,
the failure an overload, the two windows pooled as one are not overloaded
(`probe.pooled_overloaded`, search version 9); the doubtful probe's verdict is then overruled:
the answer ignores it, while `qps_range` and `non_monotonic` count it (a rate where the seeds
disagree bounds the range). A reseed that would replay the probe exactly (a trace at least the
longest probe long: `probe.reseed_replays`) is not made.

Invariant after step 2: `low` passed and `high` failed, low < high. The answer is `low`, or the
range's low end when a repeat failed at `low` (and some rate passed with every seed); the
binding SLO is the worst violation at `high`. Every pair of probes (any seed) where a rate passed
above one that failed is reported in `non_monotonic`: the search assumes that lower rates pass,
and says when that fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sim_core.errors import ConfigError
from sim_core.export.text import shorten
from sim_core.sweep.probe import Probe, doubtful_overload, pooled_overloaded, reseed_replays, run_probe, severity
from sim_core.sweep.spec import SearchSettings

NO_LIMIT = "none (meets the SLOs at qps_max)"
MAX_REPORTED = 5   # non-monotonic pairs listed
# the capacity within the SLOs is usually somewhat below the service rate (about 0.75 of it for
# a TBT-bound chat workload): the first steps down from that guess are these factors, which leave
# a narrow bracket to bisect when one passes
GUESS_STEPS = (0.75, 0.75)
# a short probe failing its SLO limits by at most this ratio (severity) is doubtful: reseeded
DOUBTFUL_SEVERITY = 1.1


@dataclass(frozen=True)
class Capacity:
    """The search's answer for one configuration.

    Attributes:
        max_qps: highest rate that met every SLO, with every seed whose verdict stands (a
            doubtful failure a reseeded probe overruled does not; 0 when even qps_min failed or
            it cannot run).
        binding_slo: the SLO that failed just above max_qps, NO_LIMIT, or "infeasible: ..." when
            the configuration cannot run at any rate.
        probes: every probe, in the order made.
        at_capacity: the metrics of the probe at max_qps (None when max_qps is 0).
        qps_range: (low, high) the capacity lies in, from every probe, overruled ones included:
            see step 4 (high None above qps_max); max_qps lies above low where the seeds
            disagreed at it.
        non_monotonic: "pass at X above a fail at Y" for the first MAX_REPORTED such pairs.
    """

    max_qps: float
    binding_slo: str
    probes: tuple[Probe, ...]
    at_capacity: dict | None
    qps_range: tuple[float, float | None] = (0.0, None)
    non_monotonic: tuple[str, ...] = ()

    @property
    def uncertainty(self) -> float | None:
        """Relative width of qps_range, (high - low) / low (None when unbounded)."""
        low, high = self.qps_range
        return None if high is None or low <= 0 else (high - low) / low

    def to_json(self) -> dict:
        return {"max_qps": self.max_qps, "binding_slo": self.binding_slo, "at_capacity": self.at_capacity,
                "qps_range": list(self.qps_range), "uncertainty": self.uncertainty,
                "non_monotonic": list(self.non_monotonic), "probes": [probe.to_json() for probe in self.probes]}


Evaluate = Callable[[float], Probe]
Severity = Callable[[Probe], float | None]   # probe -> its largest metric / limit (probe.severity)
Repeat = Callable[[float, int], Probe]   # (rate, k) -> the probe with the k-th other seed


RunProbe = Callable[..., Probe]   # run_probe's signature: (scenario, qps, slo, settings, repeat=0, length=1)


def capacity_search(scenario: dict, slo: dict, settings: SearchSettings, run: RunProbe | None = None) -> Capacity:
    """Search the capacity of one scenario by simulating it (see the module docstring); `run`
    makes each probe (default `probe.run_probe`; `sweep/reuse.py` passes one that replays probes
    proved identical). A doubtful failure is not reseeded when seed +1 would replay it exactly
    (`probe.reseed_replays`: a long enough trace)."""
    run = run or run_probe
    length = settings.confirm_length
    return bracket_search(lambda qps: run(scenario, qps, slo, settings), settings,
                          lambda qps, k: run(scenario, qps, slo, settings, k),
                          (lambda qps: run(scenario, qps, slo, settings, length=length)) if length > 1 else None,
                          lambda probe: severity(probe, slo), reseed=not _replays(scenario, settings))


def _replays(scenario: dict, settings: SearchSettings) -> bool:
    try:
        return reseed_replays(scenario, settings)
    except (ConfigError, ValueError):   # the search's first probe reports what is wrong with it
        return False


class _Probes:
    """The search's probes in the order made, and which of them a reseeded probe overruled (by
    index: a memo may hand the same Probe object back for a repeated rate)."""

    def __init__(self, evaluate: Evaluate, repeat: Repeat | None, measure: Severity | None, reseed: bool) -> None:
        self.made: list[Probe] = []
        self.overruled: set[int] = set()
        self.evaluate, self.repeat, self.measure, self.reseed = evaluate, repeat, measure, reseed

    def keep(self, probe: Probe) -> Probe:
        self.made.append(probe)
        return probe

    def probe(self, qps: float) -> Probe:
        """The verdict at `qps`: the short probe's, or, when its failure is doubtful, the
        reseeded probe's where that one overrules it (`_agrees`)."""
        first = self.keep(self.evaluate(qps))
        if self.repeat is None or not self.reseed or not _doubtful(first, self.measure):
            return first
        again = self.keep(self.repeat(qps, 1))
        if not _agrees(first, again, self.measure):
            return first
        self.overruled.add(len(self.made) - 2)
        return again

    def settled(self) -> list[Probe]:
        """The probes whose verdicts stand."""
        return [p for i, p in enumerate(self.made) if i not in self.overruled]

    def reseeded(self, rate: float, repeats: int) -> list[Probe]:
        """The short probes at `rate` with the first `repeats` other seeds not tried there yet."""
        if self.repeat is None:
            return []
        made = {p.repeat for p in self.made if p.qps == rate and p.length == 1}
        return [self.keep(self.repeat(rate, k)) for k in range(1, repeats + 1) if k not in made]


def bracket_search(evaluate: Evaluate, settings: SearchSettings, repeat: Repeat | None = None,
                   confirm: Evaluate | None = None, measure: Severity | None = None,
                   reseed: bool = True) -> Capacity:
    """The search over any rate -> Probe function (tests pass one with a known capacity);
    `repeat` reruns a rate with another seed (None: no repeats), `confirm` probes a rate at
    length (None: no confirmation), `measure` says how far a probe is from the SLO limits (None:
    plain geometric bisection), `reseed` whether a doubtful failure is reseeded at once.

    The answer (and its metrics) comes from the settled verdicts; `qps_range` and
    `non_monotonic` from every probe: an overruled failure still bounds the range."""
    made = _Probes(evaluate, repeat, measure, reseed)
    probes, probe = made.made, made.probe
    try:
        top = probe(settings.qps_max)
        if top.passed:
            return Capacity(top.qps, NO_LIMIT, tuple(probes), top.metrics, (top.qps, None))
        low, high = _bracket(probe, top, settings, measure)
        if low is None:
            return Capacity(0.0, high.violated[0], tuple(probes), None, (0.0, high.qps), _non_monotonic(probes))
        long = (lambda qps: made.keep(confirm(qps))) if confirm is not None else None
        low, high = _narrow(probe, low, high, settings, measure, long)
        if long is None:
            for rate in (low.qps, high.qps):
                made.reseeded(rate, settings.repeats)
        if long is not None:
            confirmed, failed = _confirm(long, low, settings, measure)
            if confirmed is None:
                return Capacity(0.0, failed.violated[0], tuple(probes), None, _range(probes), _non_monotonic(probes))
            if failed is low:   # the short range above the answer stands: reseed its end
                made.reseeded(high.qps, settings.repeats)
            low, high = confirmed, (high if failed is low else failed)
            return Capacity(low.qps, high.violated[0], tuple(probes), low.metrics, _confirmed_range(probes),
                            _non_monotonic(probes))
    except ConfigError as error:          # the configuration cannot run (e.g. the model does not fit)
        return Capacity(0.0, f"infeasible: {shorten(error, 500)}", tuple(probes), None)
    answer = _range(made.settled())[0]
    if 0.0 < answer < low.qps:     # a repeat failed at low: answer what every seed passed
        low = next(p for p in made.settled() if p.qps == answer and p.passed)
    return Capacity(low.qps, high.violated[0], tuple(probes), low.metrics, _range(probes), _non_monotonic(probes))


def overruled(probes: list[Probe], measure: Severity | None = None) -> set[int]:
    """The indices of the probes whose verdicts the reseeded probe made next overruled (a
    doubtful failure followed by its seed +1 at that rate that `_agrees`), derived from a
    search's probes as `bracket_search` decided them (`measure`: the search's severity)."""
    return {i for i, (first, again) in enumerate(zip(probes, probes[1:]))
            if _doubtful(first, measure) and again.qps == first.qps and again.repeat == 1
            and again.length == 1 and _agrees(first, again, measure)}


def _doubtful(probe: Probe, measure: Severity | None) -> bool:
    """A failure that a short window's noise may have made: on overload alone within the
    backlog's fluctuation (`probe.doubtful_overload`), or on the SLO limits alone by at most
    DOUBTFUL_SEVERITY (with `measure`)."""
    if probe.length > 1 or probe.passed:
        return False
    at = measure(probe) if measure is not None else None
    return doubtful_overload(probe) or (at is not None and 1.0 < at <= DOUBTFUL_SEVERITY)


def _agrees(first: Probe, again: Probe, measure: Severity | None) -> bool:
    """Whether the reseeded probe `again` overrules the doubtful `first`: it passed, and the two
    windows' evidence pooled does not fail (a pass by a hair does not outvote a fail by a
    margin): when both measured how far they are from the SLO limits, their geometric mean is
    within them; when `first` failed on overload, the two windows pooled as one are not
    overloaded (`probe.pooled_overloaded`)."""
    if not again.passed:
        return False
    if doubtful_overload(first) and pooled_overloaded(first.metrics, again.metrics):
        return False
    at, other = (measure(first), measure(again)) if measure is not None else (None, None)
    return at is None or other is None or at * other <= 1.0


def _confirm(probe: Callable[[float], Probe], low: Probe, settings: SearchSettings,
             measure: Severity | None = None) -> tuple[Probe | None, Probe]:
    """(the long probe that passed or None when even qps_min fails at length, the lowest long
    probe that failed above it, or `low` itself when the first long probe passed): at the
    answer, then one tolerance step below it (a pass there closes the bracket: where the long
    probes disagree with the short ones it is mostly by a few percent), then further below
    (step 5 of the module docstring)."""
    attempt = low if low.length > 1 else probe(low.qps)   # the narrowing's closing probe was long
    if attempt.passed:
        return attempt, low
    high = attempt
    attempt = probe(max(high.qps / (1.0 + settings.tolerance), settings.qps_min))
    if attempt.passed:                # one tolerance step below the long failure: closed
        return attempt, high
    if attempt.qps <= settings.qps_min:
        return None, attempt
    high, step = attempt, 1.0 + 2.0 * settings.tolerance   # a bracket wider than the tolerance
    while True:
        qps = max(high.qps / step, settings.qps_min)
        attempt = probe(qps)
        if attempt.passed:
            break
        high, step = attempt, step * step
        if qps <= settings.qps_min:
            return None, high
    return _narrow(probe, attempt, high, settings, measure)


def _narrow(probe: Callable[[float], Probe], low: Probe, high: Probe, settings: SearchSettings,
            measure: Severity | None, closing: Callable[[float], Probe] | None = None) -> tuple[Probe, Probe]:
    """(highest passing, lowest failing probe) once the failing one is within `tolerance` above
    the passing one: each probe at the rate `_aim` picks, or at the geometric middle after a
    probe whose verdict `_aim` mispredicted and instead of a second plain estimate in a row
    (neither tried to close the bracket: on a severity flat below capacity that jumps above
    it, estimates can creep up an eighth of the bracket at a time). A probe expected to pass
    one tolerance step below `high` is made with `closing` when given (the confirming long
    probe: if it passes it is the answer, and a short probe there would only be repeated long)."""
    ratio, bisect, estimated = 1.0 + settings.tolerance, False, False
    while high.qps > low.qps * ratio * (1.0 + 1e-12):   # a bracket one step wide may round a hair above it
        aimed = None if bisect or measure is None else _aim(low, high, measure(low), measure(high), ratio)
        if aimed is not None and aimed[1] is None and estimated:
            aimed = None
        qps, expected = aimed if aimed is not None else (math.sqrt(low.qps * high.qps), None)
        middle = (closing or probe)(qps) if expected is True else probe(qps)
        bisect = expected is not None and middle.passed != expected
        estimated = aimed is not None and expected is None
        low, high = (middle, high) if middle.passed else (low, middle)
        if expected is not None and middle.passed == expected:
            break   # one tolerance step from the other end: closed (the product may round a hair above it)
    return low, high


def _aim(low: Probe, high: Probe, at_low: float | None, at_high: float | None,
         ratio: float) -> tuple[float, bool | None] | None:
    """(the next rate, the verdict expected there or None) from the severities at the bracket's
    ends, or None when one is unknown: the rate where the severity, linear in log rate, reaches
    1; when that lies within sqrt(ratio) of an end, one `ratio` step from that end instead
    (expected to fail above `low`, to pass below `high`: either closes the bracket), else the
    estimate itself, kept an eighth of the bracket (in log rate) away from either end."""
    if at_low is None or at_high is None or not 0.0 < at_low <= 1.0 < at_high:
        return None
    span = math.log(high.qps / low.qps)
    estimate = _severity_one(low.qps, at_low, high.qps, at_high)
    if estimate <= low.qps * math.sqrt(ratio):
        return low.qps * ratio, False
    if estimate >= high.qps / math.sqrt(ratio):
        return high.qps / ratio, True
    return min(max(estimate, low.qps * math.exp(span / 8)), high.qps * math.exp(-span / 8)), None


def _severity_one(qps: float, severity: float, other_qps: float, other_severity: float) -> float:
    """The rate where the severity reaches 1 on the line, in log rate and log severity, through
    (qps, severity) and (other_qps, other_severity) (the severities differ)."""
    return qps * math.exp(math.log(other_qps / qps) * -math.log(severity) / math.log(other_severity / severity))


def _confirmed_range(probes: list[Probe]) -> tuple[float, float | None]:
    """The range once long probes ran (step 5): from the highest rate a long probe passed below
    every long failure to the lowest long failure, or the short probes' range above it."""
    longest = max(probe.length for probe in probes)
    ceiling = min((p.qps for p in probes if p.length == longest and not p.passed), default=None)
    low = max((p.qps for p in probes if p.length == longest and p.passed and (ceiling is None or p.qps < ceiling)),
              default=0.0)
    if ceiling is None:
        ceiling = _range([p for p in probes if p.length < longest and p.qps > low])[1]
    return low, ceiling


def _range(probes: list[Probe]) -> tuple[float, float | None]:
    """(the highest rate that passed with every seed tried there, below every rate that failed
    with every seed, or 0; the lowest such failing rate, None if none)."""
    by_rate: dict[float, list[bool]] = {}
    for probe in probes:
        by_rate.setdefault(probe.qps, []).append(probe.passed)
    ceiling = min((rate for rate, verdicts in by_rate.items() if not any(verdicts)), default=None)
    below = [rate for rate, verdicts in by_rate.items() if all(verdicts) and (ceiling is None or rate < ceiling)]
    return max(below, default=0.0), ceiling


def _non_monotonic(probes: list[Probe]) -> tuple[str, ...]:
    """Pairs where a rate passed above a rate that failed (any seeds; probes of one length: a
    short probe passing above a long one's failure is the noise the long probe is there for)."""
    fails = sorted({(p.qps, p.length) for p in probes if not p.passed})
    pairs = sorted({(p.qps, f) for p in probes if p.passed for f, length in fails if f < p.qps and length == p.length})
    return tuple(f"pass at {up:.4g} req/s above a fail at {down:.4g}" for up, down in pairs[:MAX_REPORTED])


def _bracket(probe: Callable[[float], Probe], top: Probe, settings: SearchSettings,
             measure: Severity | None = None) -> tuple[Probe | None, Probe]:
    """(highest passing probe or None, lowest failing probe): from the guess down, first by
    GUESS_STEPS, then by halves, or less far where the two lowest failures' severities say the
    capacity is near (`_step_down`); or up from a served-rate guess that passed (`_step_up`)."""
    qps, served = _first_guess(top, settings)
    high = probe(qps)
    if high.passed:
        return _step_up(probe, high, top, settings) if served else (high, top)
    steps, above = iter(GUESS_STEPS), top
    while high.qps > settings.qps_min:
        step = next(steps, 0.5)
        aimed = _step_down(above, high, measure, settings.tolerance) if measure is not None else None
        attempt = probe(max(aimed or high.qps * step, settings.qps_min))
        if attempt.passed:
            return attempt, high
        above, high = high, attempt
    return None, high


def _step_down(above: Probe, high: Probe, measure: Severity, tolerance: float) -> float | None:
    """The next rate below two failures whose severities (`above` at the higher rate; both over
    1, falling with the rate) extrapolate, linear in log rate and log severity, to 1 at most
    halfway down (in rate) from `high`: one tolerance step below `high` when that point lies
    within sqrt(1 + tolerance) of it (expected to pass: it closes the bracket), else the point
    itself. None (step as usual) when the point lies further down, or either severity is unknown
    (overloaded, rejected) or they do not fall with the rate: a far extrapolation is unreliable
    (a TTFT curve that rises slowly with the rate, as with static batching, bends), while one
    from two failures near the capacity lands next to it instead of half a bracket below."""
    at_above, at_high = measure(above), measure(high)
    if at_above is None or at_high is None or not at_above > at_high > 1.0 or above.qps <= high.qps:
        return None
    estimate = _severity_one(high.qps, at_high, above.qps, at_above)
    if estimate >= high.qps / math.sqrt(1.0 + tolerance):
        return high.qps / (1.0 + tolerance)
    return estimate if estimate >= high.qps / 2.0 else None


def _step_up(probe: Callable[[float], Probe], low: Probe, top: Probe,
             settings: SearchSettings) -> tuple[Probe, Probe]:
    """(highest passing, lowest failing probe) above a served-rate guess that passed: up by
    1 + 2 x tolerance, squaring the step after each pass, while below `top` (which failed)."""
    step = 1.0 + 2.0 * settings.tolerance
    while low.qps * step < top.qps:
        attempt = probe(low.qps * step)
        if not attempt.passed:
            return low, attempt
        low, step = attempt, step * step
    return low, top


def _first_guess(top: Probe, settings: SearchSettings) -> tuple[float, bool]:
    """(the rate served while overloaded at qps_max, True), or (the geometric middle of the
    range, False) when the run served no less than qps_max."""
    served = top.metrics.get("served_rps")
    if served is None or served >= settings.qps_max:
        return math.sqrt(settings.qps_min * settings.qps_max), False
    return max(served, settings.qps_min), True
