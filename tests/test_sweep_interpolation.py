"""Capacity search, narrowing by interpolation: how far each end of the bracket is from the SLO
limits (`probe.severity`) aims the next probe, and a misprediction falls back to bisection."""

from dataclasses import replace

from sim_core.sweep import SearchSettings, bracket_search
from sim_core.sweep.probe import OVERLOADED, Probe, severity
from sim_core.sweep.search import _narrow, _step_down

SETTINGS = SearchSettings(qps_min=0.25, qps_max=64.0, num_requests=100, tolerance=0.05)
SLO = {"ttft_p90_s": 2.0}


def steep(failing_ratio: float | None = None):
    """A system meeting TTFT p90 <= 2 s up to 10 req/s, whose TTFT p90 is 2 x (qps / 10)^4
    (severity (qps / 10)^4: linear in log rate and log ratio, as the interpolation assumes), or
    2 x `failing_ratio` at every failing rate when given; it serves 12 req/s when overloaded."""
    def rule(qps: float) -> Probe:
        ratio = (qps / 10.0) ** 4 if failing_ratio is None or qps <= 10.0 else failing_ratio
        return Probe(qps, qps <= 10.0, {"served_rps": 12.0, "ttft_p90_s": 2.0 * ratio},
                     () if qps <= 10.0 else ("ttft_p90_s",))
    return rule


def measure(probe: Probe) -> float | None:
    return severity(probe, SLO)


def test_interpolating_the_severity_closes_the_bracket_in_two_probes():
    """qps_max 64 fails, the served-rate guess 12 fails, both on TTFT alone: severities 6.4^4 =
    1677.7 and 1.2^4 = 2.0736, which extrapolate (linear in log rate and log severity: slope 4)
    to 1 at 12 x 2.0736^(-1/4) = 10, between 12 / 2 and 12 / sqrt(1.05) = 11.711: the step down
    goes to 10 (passes; search version 5 stepped to 0.75 x 12 = 9 first). Then severity 1 at 10,
    so the narrowing's estimate is 10 itself, within sqrt(1.05) of the passing end: probe 10 x
    1.05 = 10.5, which fails as expected and closes the bracket (10.5 / 10 = 1.05). Bisection
    from [9, 12] took six probes ([64, 12, 9, 10.392, 9.671, 10.025], tests/test_sweep_search.py)
    and answered 9.671."""
    result = bracket_search(steep(), SETTINGS, measure=measure)
    assert [round(p.qps, 3) for p in result.probes] == [64.0, 12.0, 10.0, 10.5]
    assert round(result.max_qps, 3) == 10.0 and result.binding_slo == "ttft_p90_s"


def test_failures_near_the_capacity_step_down_to_it_not_half_way():
    """Static batching: TTFT p90 = 2 x (qps / 10)^0.25 (capacity 10), overloaded above 50 req/s,
    where it serves 50. qps_max 64 is overloaded (no severity); the guess 50 fails (5^0.25 =
    1.4953), 0.75 x 50 = 37.5 fails (1.3916). Those two extrapolate (slope 0.25) to 1 at 37.5 /
    3.75 = 10, below 37.5 / 2: too far to trust, so the steps go on: 0.75 x 37.5 = 28.125 and
    28.125 / 2 = 14.0625 fail. From 28.125 and 14.0625 the point, 14.0625 / 1.40625 = 10, lies
    within half of 14.0625: probe 10 (passes), then 10 x 1.05 = 10.5 (fails as expected): closed.
    Search version 5 halved to 7.031 (passes) and narrowed [7.031, 14.0625] at 10 and 10.5: one
    probe more."""
    def rule(qps: float) -> Probe:
        if qps > 50.0:
            return Probe(qps, False, {"served_rps": 50.0, "ttft_p90_s": 60.0}, (OVERLOADED, "ttft_p90_s"))
        ratio = (round(qps, 9) / 10.0) ** 0.25    # the extrapolated 10 is 10 up to float rounding
        return Probe(qps, ratio <= 1.0, {"served_rps": qps, "ttft_p90_s": 2.0 * ratio},
                     () if ratio <= 1.0 else ("ttft_p90_s",))
    result = bracket_search(rule, SETTINGS, measure=measure)
    assert [round(p.qps, 3) for p in result.probes] == [64.0, 50.0, 37.5, 28.125, 14.062, 10.0, 10.5]
    assert round(result.max_qps, 3) == 10.0


def test_a_step_down_next_to_the_failure_closes_the_bracket_or_is_not_taken():
    """Failures at 12 (severity 1.1) and 10.5 (1.01): slope ln(1.1 / 1.01) / ln(12 / 10.5) =
    0.6393, so the severity reaches 1 at 10.5 x 1.01^(-1 / 0.6393) = 10.338, within sqrt(1.05)
    of 10.5 (10.247 and above): the step goes to 10.5 / 1.05 = 10, expected to pass. At 10.5
    with severity 1.05 instead (slope 0.3484) the point is 10.5 x 1.05^(-1 / 0.3484) = 9.128:
    itself. With 1.6 at 12 and 1.5 at 10.5 the point, 10.5 x 1.5^(-1 / 0.4833) = 4.538, lies below 10.5 / 2:
    no step of its own; nor from an overloaded failure, nor when the severity does not fall
    with the rate."""
    def failure(qps: float, ratio: float, *violated: str) -> Probe:
        return Probe(qps, False, {"ttft_p90_s": 2.0 * ratio}, violated or ("ttft_p90_s",))
    assert _step_down(failure(12.0, 1.1), failure(10.5, 1.01), measure, 0.05) == 10.5 / 1.05
    assert round(_step_down(failure(12.0, 1.1), failure(10.5, 1.05), measure, 0.05), 3) == 9.128
    assert _step_down(failure(12.0, 1.6), failure(10.5, 1.5), measure, 0.05) is None
    assert _step_down(failure(12.0, 1.1, OVERLOADED), failure(10.5, 1.01), measure, 0.05) is None
    assert _step_down(failure(12.0, 1.01), failure(10.5, 1.1), measure, 0.05) is None


def test_a_mispredicted_probe_is_followed_by_a_bisection():
    """Every failing rate reports severity 100, so from 0.6561 at 9 and 100 at 12 the severity
    reaches 1 at 9 x (12/9)^(ln(1 / 0.6561) / ln(100 / 0.6561)) = 9 x (4/3)^0.08384 = 9.220,
    within sqrt(1.05) of 9 (9.222): the search probes 9 x 1.05 = 9.45 expecting a failure. It
    passes, so the next probe is the geometric middle of [9.45, 12], sqrt(113.4) = 10.649
    (fails). The answer still passes, with the next failure within 5% above it."""
    result = bracket_search(steep(failing_ratio=100.0), SETTINGS, measure=measure)
    assert [round(p.qps, 3) for p in result.probes[:5]] == [64.0, 12.0, 9.0, 9.45, 10.649]
    assert result.max_qps <= 10.0 < result.max_qps * 1.05


def test_two_plain_estimates_in_a_row_give_way_to_a_bisection():
    """Capacity 11.5; severity 0.3 wherever it passes, 50 wherever it fails (flat, then a jump).
    From [9, 12] (as above) the severity reaches 1 at 9 x (4/3)^(ln(1 / 0.3) / ln(50 / 0.3)) =
    9 x (4/3)^0.23533 = 9.630, a plain estimate (between 9.222 and 11.711): it passes. The next
    estimate, 9.630 x (12 / 9.630)^0.23533 = 10.142, would be a second plain one: bisect instead
    at sqrt(9.630 x 12) = 10.750 (passes). Then 10.750 x (12 / 10.750)^0.23533 = 11.032 lies
    between 10.750 x sqrt(1.05) = 11.016 and 12 / sqrt(1.05) = 11.711: a plain estimate again,
    allowed after a bisection; it passes. From [11.032, 12] the estimate 11.032 x (12 /
    11.032)^0.23533 = 11.253 is within sqrt(1.05) of 11.032 (11.305): probe 11.032 x 1.05 =
    11.584, which fails as expected: closed. Plain estimates all the way would take six probes
    (9.630, 10.142, 10.552, 10.876, 11.42, 11.706), bisection three."""
    def rule(qps: float) -> Probe:
        passed = qps <= 11.5
        return Probe(qps, passed, {"served_rps": 12.0, "ttft_p90_s": 0.6 if passed else 100.0},
                     () if passed else ("ttft_p90_s",))
    result = bracket_search(rule, SETTINGS, measure=measure)
    assert [round(p.qps, 3) for p in result.probes] == [64.0, 12.0, 9.0, 9.63, 10.75, 11.032, 11.584]
    assert round(result.max_qps, 3) == 11.032


def test_without_a_measure_the_search_bisects():
    """The same system without `measure`: the plain geometric bisection of [9, 12]."""
    result = bracket_search(steep(), SETTINGS)
    assert [round(p.qps, 3) for p in result.probes] == [64.0, 12.0, 9.0, 10.392, 9.671, 10.025]


def test_severity_is_the_worst_metric_over_its_limit_when_only_slos_decide():
    """TTFT p90 3 s against 2 s (1.5) and TBT p99 0.125 s against 0.25 s (0.5): 1.5. A passing
    probe: TTFT 1 s (0.5), TBT 0.1875 s (0.75): 0.75; a metric without samples (TBT None) is left
    out: 0.5. Undefined when the verdict is not the limits' (overloaded), under an attainment
    criterion, or with no metric at all."""
    slo = {"ttft_p90_s": 2.0, "tbt_p99_s": 0.25}
    assert severity(Probe(5.0, False, {"ttft_p90_s": 3.0, "tbt_p99_s": 0.125}, ("ttft_p90_s",)), slo) == 1.5
    assert severity(Probe(5.0, True, {"ttft_p90_s": 1.0, "tbt_p99_s": 0.1875}, ()), slo) == 0.75
    assert severity(Probe(5.0, True, {"ttft_p90_s": 1.0, "tbt_p99_s": None}, ()), slo) == 0.5
    assert severity(Probe(5.0, False, {"ttft_p90_s": 3.0, "tbt_p99_s": 0.125}, (OVERLOADED, "ttft_p90_s")), slo) is None
    assert severity(Probe(5.0, True, {"ttft_p90_s": 1.0, "tbt_p99_s": 0.125}, ()), {**slo, "attainment": 0.9}) is None
    assert severity(Probe(5.0, True, {"ttft_p90_s": None, "tbt_p99_s": None}, ()), slo) is None


def test_a_predicted_closing_probe_ends_the_narrowing_whatever_the_rounding():
    """Found on sarathi with 11 replicas at 10% tolerance: the bracket [171.790 (severity 0.814),
    206.147 (1.022)]; the severity reaches 1 at 171.790 x 1.2^(ln(1 / 0.814) / ln(1.022 /
    0.814)) = 202.6, within sqrt(1.1) of 206.147, so the probe goes to 206.147 / 1.1 = 187.407,
    expected to pass. It passes, and the bracket is closed although 187.407 x 1.1 rounds a hair
    below 206.147 (the search used to probe 187.407 again forever)."""
    settings = SETTINGS.model_copy(update={"tolerance": 0.1})
    low = Probe(171.78955295148006, True, {"ttft_p90_s": 2.0 * 0.814}, ())
    high = Probe(206.14746354177606, False, {"ttft_p90_s": 2.0 * 1.022}, ("ttft_p90_s",))
    calls = []

    def rule(qps: float) -> Probe:
        calls.append(qps)
        assert len(calls) <= 3, calls
        return Probe(qps, qps < 190.0, {"ttft_p90_s": 2.0 * 0.906}, () if qps < 190.0 else ("ttft_p90_s",))
    found_low, found_high = _narrow(rule, low, high, settings, measure)
    assert [round(q, 3) for q in calls] == [187.407]
    assert (round(found_low.qps, 3), round(found_high.qps, 3)) == (187.407, 206.147)


def overloaded_above_11(qps: float) -> Probe:
    """TTFT p90 2 x (qps / 10)^4 up to 11 req/s (capacity 10), overloaded above, serving 11.8."""
    if qps > 11.0:
        return Probe(qps, False, {"served_rps": 11.8, "ttft_p90_s": 60.0}, (OVERLOADED, "ttft_p90_s"))
    ratio = (qps / 10.0) ** 4
    return Probe(qps, ratio <= 1.0, {"served_rps": qps, "ttft_p90_s": 2.0 * ratio},
                 () if ratio <= 1.0 else ("ttft_p90_s",))


def test_a_closing_probe_expected_to_pass_is_the_long_one():
    """qps_max 64 and the guess 11.8 are overloaded; 0.75 x 11.8 = 8.85 passes (severity 0.885^4
    = 0.6134); the overloaded end has no severity, so bisect: sqrt(8.85 x 11.8) = 10.219 fails
    (1.0906). From [8.85, 10.219] the severity reaches 1 at 10, within sqrt(1.05) of 10.219
    (9.973 and above): 10.219 / 1.05 = 9.732 is expected to pass, and is probed long at once
    (long probes pass up to 10): the answer, without a short probe there, range [9.732, 10.219]."""
    def long(qps: float) -> Probe:
        return replace(overloaded_above_11(qps), length=4)
    result = bracket_search(overloaded_above_11, SETTINGS, confirm=long, measure=measure)
    assert [(round(p.qps, 3), p.passed, p.length) for p in result.probes] == [
        (64.0, False, 1), (11.8, False, 1), (8.85, True, 1), (10.219, False, 1), (9.732, True, 4)]
    assert round(result.max_qps, 3) == 9.732
    assert tuple(round(rate, 3) for rate in result.qps_range) == (9.732, 10.219)


def test_a_long_closing_probe_that_fails_bounds_the_narrowing():
    """The same with long probes passing only up to 9.5: the long probe at 9.732 fails, so the
    narrowing bisects [8.85, 9.732] at sqrt(8.85 x 9.732) = 9.281 (short, passes; 9.732 / 9.281
    = 1.049: closed), and the long probe at 9.281 passes: answer 9.281, range up to the long
    failure, [9.281, 9.732]."""
    def long(qps: float) -> Probe:
        return replace(overloaded_above_11(qps), passed=qps <= 9.5, violated=() if qps <= 9.5 else ("ttft_p90_s",),
                       length=4)
    result = bracket_search(overloaded_above_11, SETTINGS, confirm=long, measure=measure)
    assert [(round(p.qps, 3), p.passed, p.length) for p in result.probes[4:]] == [
        (9.732, False, 4), (9.281, True, 1), (9.281, True, 4)]
    assert round(result.max_qps, 3) == 9.281
    assert tuple(round(rate, 3) for rate in result.qps_range) == (9.281, 9.732)
