"""Capacity search, the overload test on a short window: a shortfall within the backlog's own
fluctuation is doubtful (`probe.doubtful_overload`), and the search believes it only when a
reseeded probe at that rate fails too."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core import parse_config
from sim_core.sweep import SearchSettings, bracket_search
from sim_core.sweep.probe import OVERLOADED, Probe, _backlog_spread, doubtful_overload, judge, run_probe, severity

SETTINGS = SearchSettings(qps_min=0.25, qps_max=64.0, num_requests=100, tolerance=0.05)


def overloaded(qps: float, served_share: float, spread: float, *also: str, repeat: int = 0) -> Probe:
    """A probe at `qps` whose window served `served_share` of its arrivals (failing the overload
    test) with the backlog scattered by `spread` (a share of the window's arrivals)."""
    metrics = {"throughput_rps": served_share * qps, "offered_rps": qps, "backlog_spread": spread,
               "served_rps": 12.0}
    return Probe(qps, False, metrics, (OVERLOADED, *also), repeat)


def test_the_backlogs_spread_is_its_scatter_about_the_windows_trend():
    """Backlog 1, 3, 3, 5 seen at times 0, 1, 2, 3: the least-squares line is 1.2 + 1.2 t
    (slope 6 / 5), through 1.2, 2.4, 3.6, 4.8; residuals -0.2, 0.6, -0.6, 0.2, mean square 0.2;
    as a share of the window's 4 arrivals: sqrt(0.2) / 4. A backlog on its line scatters 0."""
    times = np.array([0.0, 1.0, 2.0, 3.0])
    assert math.isclose(_backlog_spread(times, np.array([1, 3, 3, 5])), math.sqrt(0.2) / 4, rel_tol=1e-12)
    assert math.isclose(_backlog_spread(times, np.array([2, 4, 6, 8])), 0.0, abs_tol=1e-12)


def test_an_overload_within_the_backlogs_fluctuation_is_doubtful():
    """Served 95% of arrivals: a shortfall of 0.05. With the backlog scattered by 1% of the
    arrivals, two looks at it differ by sqrt(2) x 0.01 = 0.01414 (one standard deviation), and
    0.05 - 2 x 0.01414 = 0.0217 lies within 0.03 (1 - SERVED_SHARE): doubtful. Scattered by
    0.5%: 0.05 - 0.01414 = 0.0359 lies beyond it: a real overload. Served 80% with the 1%
    scatter: 0.2 - 0.0283, beyond. A probe that also failed an SLO is not doubtful: its verdict
    does not rest on the overload test."""
    assert doubtful_overload(overloaded(10.0, 0.95, 0.01))
    assert not doubtful_overload(overloaded(10.0, 0.95, 0.005))
    assert not doubtful_overload(overloaded(10.0, 0.80, 0.01))
    assert not doubtful_overload(overloaded(10.0, 0.95, 0.01, "tbt_p99_s"))


def chat_like(qps: float, repeat: int = 0) -> Probe:
    """Capacity 10 req/s; above it overloaded beyond doubt (served 80%, backlog scattered by
    0.1%); between 9.5 and 10 the first seed's window falls 5% behind with its backlog
    scattered by 1% (doubtful) while other seeds keep up."""
    if qps > 10.0:
        return overloaded(qps, 0.8, 0.001, repeat=repeat)
    if qps > 9.5 and repeat == 0:
        return overloaded(qps, 0.95, 0.01)
    return Probe(qps, True, {"served_rps": 12.0}, (), repeat)


def test_a_doubtful_overload_that_another_seed_passes_is_a_pass():
    """qps_max 64 and the served-rate guess 12 fail beyond doubt; 0.75 x 12 = 9 passes; the
    bisection of [9, 12] probes sqrt(9 x 12) = 10.392 (fails), then sqrt(9 x 10.392) = 9.671:
    doubtful, so the rate is reseeded at once (seed +1: passes) and counts as passed; then
    sqrt(9.671 x 10.392) = 10.025 fails and closes the bracket (10.025 / 9.671 = 1.037 < 1.05).
    The repeats at the bracket's ends: 9.671 already has its seed +1, 10.025 gets it (fails).
    Without the reseed 9.671 would have failed and the answer would be the 9.330 below it (the
    last test), 3.5% lower."""
    result = bracket_search(chat_like, SETTINGS, repeat=chat_like)
    assert [(round(p.qps, 3), p.repeat, p.passed) for p in result.probes] == [
        (64.0, 0, False), (12.0, 0, False), (9.0, 0, True), (10.392, 0, False), (9.671, 0, False),
        (9.671, 1, True), (10.025, 0, False), (10.025, 1, False)]
    assert round(result.max_qps, 3) == 9.671 and result.binding_slo == OVERLOADED
    assert [round(end, 3) for end in result.qps_range] == [9.671, 10.025]
    assert result.non_monotonic == ()


def test_a_doubtful_overload_that_another_seed_fails_stands():
    """The same system whose other seeds also fall behind between 9.5 and 10 (served 96%, a
    plain overload): 9.671 fails with both seeds, so the bracket closes below it: sqrt(9 x
    9.671) = 9.330 passes (9.671 / 9.330 = 1.037), and the answer is 9.330 with the range up
    to 9.671."""
    def stubborn(qps: float, repeat: int = 0) -> Probe:
        if 9.5 < qps <= 10.0 and repeat:
            return overloaded(qps, 0.96, 0.001, repeat=repeat)
        return chat_like(qps, repeat)
    result = bracket_search(stubborn, SETTINGS, repeat=stubborn)
    assert [(round(p.qps, 3), p.repeat, p.passed) for p in result.probes] == [
        (64.0, 0, False), (12.0, 0, False), (9.0, 0, True), (10.392, 0, False), (9.671, 0, False),
        (9.671, 1, False), (9.33, 0, True), (9.33, 1, True)]
    assert round(result.max_qps, 3) == 9.33
    assert [round(end, 3) for end in result.qps_range] == [9.33, 9.671]


def test_without_a_reseeding_function_a_doubtful_overload_fails():
    """bracket_search without `repeat` cannot ask another seed: the doubtful 9.671 fails, and
    the answer is the 9.330 below it, as in search version 7."""
    result = bracket_search(chat_like, SETTINGS)
    assert [round(p.qps, 3) for p in result.probes] == [64.0, 12.0, 9.0, 10.392, 9.671, 9.33]
    assert round(result.max_qps, 3) == 9.33


def test_an_overload_within_the_fluctuation_is_left_to_the_slos_that_fail_anyway():
    """Served 95% with the backlog scattered by 1% of the arrivals (within its fluctuation, as
    above) and TBT p99 0.25 s over its 0.2 s limit: the probe fails on TBT alone, so the search
    can aim with its severity (1.25); scattered by 0.5% (a real overload) it is overloaded as
    well; with TBT p99 0.15 s the doubtful overload is its only violation."""
    summary = {"num_rejected": 0, "tbt_p99_s": 0.25, "backlog_growth": 0.05, "throughput_rps": 9.5,
               "offered_rps": 10.0, "backlog_spread": 0.01}
    slo = {"tbt_p99_s": 0.2}
    assert judge(10.0, summary, slo).violated == ("tbt_p99_s",)
    assert judge(10.0, {**summary, "backlog_spread": 0.005}, slo).violated == (OVERLOADED, "tbt_p99_s")
    alone = judge(10.0, {**summary, "tbt_p99_s": 0.15}, slo)
    assert alone.violated == (OVERLOADED,) and doubtful_overload(alone)


def noisy(first: float, second: float):
    """TTFT p90 = 2 x (qps / 10)^4 (capacity 10 under a 2 s limit; serves 12 when overloaded),
    except that between 9.9 and 10.1 req/s the search's own seed reads it `first` times higher
    and the next seed `second` times."""
    def rule(qps: float, repeat: int = 0) -> Probe:
        ratio = (qps / 10.0) ** 4 * ((first if repeat == 0 else second) if 9.9 < qps < 10.1 else 1.0)
        return Probe(qps, ratio <= 1.0, {"served_rps": 12.0, "ttft_p90_s": 2.0 * ratio},
                     () if ratio <= 1.0 else ("ttft_p90_s",), repeat)
    return rule


def measure(probe: Probe) -> float | None:
    return severity(probe, {"ttft_p90_s": 2.0})


def test_a_failure_by_a_hair_is_reseeded_and_the_two_windows_pooled():
    """qps_max 64 (severity 6.4^4) and the guess 12 (1.2^4 = 2.0736) fail; their severities
    extrapolate to 1 at 10 (tests/test_sweep_interpolation.py), where this seed reads 1.05: a
    failure within DOUBTFUL_SEVERITY (1.1), so 10 is reseeded at once: 0.95, a pass, and the
    pooled 1.05 x 0.95 = 0.9975 <= 1: 10 passes. The narrowing aims from 0.95 at 10 and 2.0736
    at 12 at 10 x exp(ln 1.2 x -ln 0.95 / ln(2.0736 / 0.95)) = 10.12, within sqrt(1.05) of 10:
    probe 10.5 (severity 1.2155, fails beyond doubt), which closes the bracket; the repeats:
    10 has its seed +1 already, 10.5 gets it (fails)."""
    rule = noisy(1.05, 0.95)
    result = bracket_search(rule, SETTINGS, repeat=rule, measure=measure)
    assert [(round(p.qps, 3), p.repeat, p.passed) for p in result.probes] == [
        (64.0, 0, False), (12.0, 0, False), (10.0, 0, False), (10.0, 1, True), (10.5, 0, False), (10.5, 1, False)]
    assert result.max_qps == 10.0 and result.at_capacity["ttft_p90_s"] == 2.0 * 0.95
    assert [round(end, 3) for end in result.qps_range] == [10.0, 10.5] and result.non_monotonic == ()


def test_a_reseeded_pass_by_less_than_the_failures_margin_does_not_overrule_it():
    """This seed reads 1.08 at 10, the next 0.95: pooled 1.08 x 0.95 = 1.026 > 1, so 10 fails.
    Below two failures whose severities (2.0736 at 12, 1.08 at 10) extrapolate to 1 at 10 x
    exp(ln 1.2 x -ln 1.08 / ln(2.0736 / 1.08)) = 9.787, within sqrt(1.05) of 10, the step goes
    one tolerance step down, to 10 / 1.05 = 9.524 (severity 0.8227: passes), which closes the
    bracket; 9.524 gets its repeat (passes). The seeds disagree at 10: the range runs to 12, the
    lowest rate every seed failed."""
    rule = noisy(1.08, 0.95)
    result = bracket_search(rule, SETTINGS, repeat=rule, measure=measure)
    assert [(round(p.qps, 3), p.repeat, p.passed) for p in result.probes] == [
        (64.0, 0, False), (12.0, 0, False), (10.0, 0, False), (10.0, 1, True), (9.524, 0, True), (9.524, 1, True)]
    assert round(result.max_qps, 3) == 9.524 and result.binding_slo == "ttft_p90_s"
    assert [round(end, 3) for end in result.qps_range] == [9.524, 12.0]


def test_a_server_truly_overloaded_is_not_doubtful(tmp_path):
    """One request at a time, 0.1 s each (10 req/s), arrivals evenly spaced at 12 req/s: the
    window serves 10 of every 12 arrivals (shortfall 1 / 6), and the backlog climbs its line
    within a sawtooth of one request, a scatter of under 1% of the window's 80 arrivals:
    0.167 - 2 x sqrt(2) x 0.01 > 0.03, so the overload is beyond doubt and the probe fails
    without a reseed, as in search version 7."""
    path = tmp_path / "even.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + "".join(f"{i}.0,90,1\n" for i in range(100)))
    scenario = parse_config({
        "max_model_len": 1024, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
        "scheduler": {"type": "vllm", "batch_size_cap": 1, "num_blocks": 64},
        "workload": {"trace_file": str(path)}}).model_dump(mode="json")
    probe = run_probe(scenario, 12.0, {"ttft_p90_s": 100.0}, SETTINGS)
    assert probe.violated == (OVERLOADED,) and not doubtful_overload(probe)
    assert probe.metrics["backlog_spread"] < 0.01
    assert 1.0 - probe.metrics["throughput_rps"] / probe.metrics["offered_rps"] > 0.15


@settings(max_examples=200, deadline=None)
@given(st.floats(0.3, 60.0), st.floats(0.5, 0.99), st.booleans())
def test_doubtful_failures_never_pass_a_rate_every_seed_fails(capacity, band, doubtful_above):
    """Capacity `capacity`: above it every seed fails (on a doubtful overload when
    `doubtful_above`, beyond doubt otherwise); between `band` x capacity and capacity the search's
    own seed fails a doubtful overload and the others pass. The answer passed and the capacity
    lies within the tolerance above it: reseeding neither passes an overloaded rate nor leaves a
    noisy failure below the capacity standing."""
    def rule(qps: float, repeat: int = 0) -> Probe:
        if qps > capacity:
            return overloaded(qps, 0.95 if doubtful_above else 0.8, 0.01 if doubtful_above else 0.001, repeat=repeat)
        if qps > band * capacity and repeat == 0:
            return overloaded(qps, 0.95, 0.01)
        return Probe(qps, True, {"served_rps": 1.2 * capacity}, (), repeat)
    result = bracket_search(rule, SETTINGS, repeat=rule)
    assert result.max_qps <= capacity < result.max_qps * 1.05
