"""Capacity search: it brackets a known capacity, on a rule and on a real simulation, and each
probe is the scenario at the probed rate."""

import math
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core import parse_config
from sim_core.sweep import SearchSettings, bracket_search, capacity_search
from sim_core.sweep.probe import OVERLOADED, REJECTED, Probe, judge, num_probe_requests, probe_scenario, probe_workload
from sim_core.sweep.resample import _dealt_gaps, resample_rows
from sim_core.sweep.search import NO_LIMIT
from sim_core.sweep.spec import set_path
from sim_core.workload import build_workload

SETTINGS = SearchSettings(qps_min=0.25, qps_max=64.0, num_requests=100, tolerance=0.05)
SETTINGS_400 = SETTINGS.model_copy(update={"num_requests": 400})


def threshold(capacity: float, served: float | None = None):
    """A system that meets its SLO at every rate up to `capacity` and serves `served` req/s
    (default 1.2 x capacity) when overloaded."""
    served = 1.2 * capacity if served is None else served
    return lambda qps: Probe(qps, qps <= capacity, {"served_rps": served},
                             () if qps <= capacity else ("ttft_p90_s",))


@settings(max_examples=200, deadline=None)
@given(st.floats(0.26, 63.9), st.floats(0.2, 3.0))
def test_the_answer_passes_and_the_next_failure_is_within_tolerance(capacity, guess_error):
    """Whatever the capacity and however wrong the throughput guess, max_qps <= capacity < max_qps x 1.05."""
    result = bracket_search(threshold(capacity, capacity * guess_error), SETTINGS)
    assert result.max_qps <= capacity < result.max_qps * 1.05
    assert all(p.passed == (p.qps <= capacity) for p in result.probes)
    assert len(result.probes) <= 12
    assert result.binding_slo == "ttft_p90_s"


@settings(max_examples=200, deadline=None)
@given(st.floats(0.5, 1.0), st.floats(0.26, 63.9))
def test_long_probes_decide_the_answer_within_tolerance(share, capacity):
    """Long probes pass up to `share` x the short probes' capacity: the answer passed a long
    probe and the long capacity lies within 5% above it (or even qps_min fails at length)."""
    long_capacity = share * capacity
    result = bracket_search(threshold(capacity), SETTINGS, confirm=at_length(long_capacity))
    if long_capacity < SETTINGS.qps_min:
        assert result.max_qps == 0.0
        return
    assert result.max_qps <= long_capacity < result.max_qps * 1.05
    assert all(p.passed == (p.qps <= (long_capacity if p.length > 1 else capacity)) for p in result.probes)


def test_a_good_guess_brackets_in_few_probes():
    """qps_max fails, the served-rate guess (12) fails, 0.75 of it (9) passes, then geometric
    bisection of [9, 12]: sqrt(108) = 10.392 fails, sqrt(9 x 10.392) = 9.671 passes,
    sqrt(9.671 x 10.392) = 10.025 fails; 10.025 / 9.671 = 1.037 < 1.05."""
    result = bracket_search(threshold(10.0), SETTINGS)
    assert [round(p.qps, 3) for p in result.probes] == [64.0, 12.0, 9.0, 10.392, 9.671, 10.025]
    assert result.max_qps == result.probes[-2].qps


def test_a_served_rate_guess_that_passes_steps_up_instead_of_bisecting_to_qps_max():
    """Capacity 10, served 8 at qps_max: the guess 8 passes; up by 1.1 to 8.8, which passes; by
    1.1 squared = 1.21 to 10.648, which fails; the bracket [8.8, 10.648] is bisected at
    sqrt(8.8 x 10.648) = 9.68 (passes), then sqrt(9.68 x 10.648) = 10.152 (fails); 10.152 / 9.68 =
    1.049 < 1.05. Bisecting [8, 64] instead would take six probes after the guess."""
    result = bracket_search(threshold(10.0, 8.0), SETTINGS)
    assert [round(p.qps, 3) for p in result.probes] == [64.0, 8.0, 8.8, 10.648, 9.68, 10.152]
    assert result.max_qps == result.probes[-2].qps


def test_a_guess_that_passes_steps_up_to_below_qps_max_at_most():
    """Passing below qps_max = 64, served 40 there: the guess 40 passes, 44 passes, 44 x 1.21 =
    53.24 passes; the next step, 53.24 x 1.4641 = 77.95, lies above qps_max (failed), so the
    bracket is [53.24, 64], bisected at sqrt(53.24 x 64) = 58.373 and sqrt(58.373 x 64) = 61.122
    (both pass); 64 / 61.122 = 1.047."""
    def rule(qps: float) -> Probe:
        passed = qps < 64.0
        return Probe(qps, passed, {"served_rps": 40.0}, () if passed else ("ttft_p90_s",))
    result = bracket_search(rule, SETTINGS)
    assert [round(p.qps, 3) for p in result.probes] == [64.0, 40.0, 44.0, 53.24, 58.373, 61.122]


def at_length(capacity: float):
    """Confirming probes (4x longer) of a system whose capacity measured at length is `capacity`."""
    return lambda qps: replace(threshold(capacity)(qps), length=4)


def test_a_long_probe_confirms_the_answer_or_moves_it_down():
    """Short probes pass up to 10 req/s (the search above ends with the bracket [9.671, 10.025]),
    long ones only up to 9. The long probe at 9.671 fails, and so does one tolerance step below
    it, 9.671 / 1.05 = 9.211; 9.211 / 1.1 = 8.373 passes; the bracket [8.373, 9.211] is bisected
    at sqrt(8.373 x 9.211) = 8.782, which passes; 9.211 / 8.782 = 1.0488 is within the
    tolerance. The answer is 8.782 and the range the long probes' [8.782, 9.211] (search version
    5 stepped 1.1 down at once: 8.792 passed, 9.221 failed, one long probe fewer here)."""
    result = bracket_search(threshold(10.0), SETTINGS, confirm=at_length(9.0))
    assert [(round(p.qps, 3), p.passed, p.length) for p in result.probes[6:]] == [
        (9.671, False, 4), (9.211, False, 4), (8.373, True, 4), (8.782, True, 4)]
    assert round(result.max_qps, 3) == 8.782 and round(result.at_capacity["served_rps"], 6) == 10.8
    assert tuple(round(rate, 3) for rate in result.qps_range) == (8.782, 9.211)
    assert result.non_monotonic == () and result.binding_slo == "ttft_p90_s"   # short passes above long fails


def test_a_long_probe_failing_just_above_the_long_capacity_closes_in_one_more():
    """Long probes pass up to 9.5: the long probe at 9.671 fails, 9.671 / 1.05 = 9.211 passes,
    and that bracket is closed (one tolerance wide): two long probes where search version 5
    took three (8.792, then sqrt(8.792 x 9.671) = 9.221)."""
    result = bracket_search(threshold(10.0), SETTINGS, confirm=at_length(9.5))
    assert [(round(p.qps, 3), p.passed, p.length) for p in result.probes[6:]] == [
        (9.671, False, 4), (9.211, True, 4)]
    assert round(result.max_qps, 3) == 9.211
    assert tuple(round(rate, 3) for rate in result.qps_range) == (9.211, 9.671)


def test_a_long_probe_that_passes_keeps_the_answer_and_the_short_range_above_it():
    """Long and short probes agree (capacity 10): the long probe at 9.671 passes; the range runs
    to the lowest short failure above it, 10.025."""
    result = bracket_search(threshold(10.0), SETTINGS, confirm=at_length(10.0))
    assert [(round(p.qps, 3), p.length) for p in result.probes[6:]] == [(9.671, 4)]
    assert round(result.max_qps, 3) == 9.671
    assert tuple(round(rate, 3) for rate in result.qps_range) == (9.671, 10.025)

def test_with_a_long_probe_only_the_failing_end_is_reseeded_and_only_when_the_long_probe_passes():
    """Short probes pass up to 10 (bracket [9.671, 10.025]), the reseeded ones up to 10.01. Long
    ones up to 10: the long probe at 9.671 passes, then 10.025 is repeated (fails), and the range
    is [9.671, 10.025]. Long ones up to 9.5: 9.671 fails, 9.211 passes; no repeat runs (the long
    probes decide answer and range)."""
    def repeat(qps, k):
        return Probe(qps, qps <= 10.01, {}, () if qps <= 10.01 else ("ttft_p90_s",), k)
    passed = bracket_search(threshold(10.0), SETTINGS, repeat, confirm=at_length(10.0))
    assert [(round(p.qps, 3), p.passed, p.repeat, p.length) for p in passed.probes[6:]] == [
        (9.671, True, 0, 4), (10.025, False, 1, 1)]
    assert tuple(round(rate, 3) for rate in passed.qps_range) == (9.671, 10.025)
    failed = bracket_search(threshold(10.0), SETTINGS, repeat, confirm=at_length(9.5))
    assert [(round(p.qps, 3), p.repeat, p.length) for p in failed.probes[6:]] == [(9.671, 0, 4), (9.211, 0, 4)]
    assert round(failed.max_qps, 3) == 9.211


def test_meeting_the_slo_at_qps_max_stops_at_once():
    result = bracket_search(threshold(100.0), SETTINGS)
    assert (result.max_qps, result.binding_slo, len(result.probes)) == (64.0, NO_LIMIT, 1)


def test_failing_at_qps_min_means_no_capacity():
    """Halving stops at qps_min; the binding SLO is what failed there."""
    result = bracket_search(threshold(0.1), SETTINGS)
    assert result.max_qps == 0.0 and result.at_capacity is None
    assert [p.qps for p in result.probes][-1] == 0.25


def _trace(tmp_path, rows: int = 100) -> str:
    path = tmp_path / "even.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + "".join(f"{i}.0,90,1\n" for i in range(rows)))
    return str(path)


def test_a_finite_window_no_longer_passes_an_overloaded_server(tmp_path):
    """One request at a time (batch cap 1), each 90 prompt tokens and 1 output token: service
    s = 10 ms + 90 x 1 ms = 0.1 s, so the server sustains 10 req/s. Arrivals every 1/q s: above
    10 req/s request i waits i x (s - 1/q), and 100 requests meet TTFT p90 <= 1.88 s up to 12.5
    req/s (the old search's answer). The window now serves 10 req/s whatever arrives: a probe
    that serves less than 95% of its offered rate is overloaded, so the answer lies between
    10 / 1.05 (the tolerance) and 10 / 0.95, and below 10 req/s TTFT is exactly s."""
    scenario = parse_config({
        "max_model_len": 1024, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
        "scheduler": {"type": "vllm", "batch_size_cap": 1, "num_blocks": 64},
        "workload": {"trace_file": _trace(tmp_path)}}).model_dump(mode="json")
    result = capacity_search(scenario, {"ttft_p90_s": 1.88}, SETTINGS)
    assert 10 / 1.05 < result.max_qps <= 10 / 0.95
    assert result.binding_slo == OVERLOADED
    for probe in result.probes:
        assert probe.passed == (probe.qps <= result.max_qps)
        if probe.qps <= 10:
            assert math.isclose(probe.metrics["ttft_p90_s"], 0.1, rel_tol=1e-9)
        if probe.qps > 10 / 0.95:
            assert OVERLOADED in probe.violated


def _md1(num_replicas: int) -> dict:
    """c replicas serving one request at a time in 0.1 s (90-token prompts, one output token),
    Poisson arrivals, least_outstanding routing: an M/D/c queue that sustains 10 c req/s."""
    return parse_config({
        "max_model_len": 1024, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
        "scheduler": {"type": "vllm", "batch_size_cap": 1, "num_blocks": 64},
        "cluster": {"num_replicas": num_replicas, "global_scheduler": "least_outstanding"},
        "workload": {"prompt_tokens": {"distribution": "fixed", "value": 90},
                     "output_tokens": {"distribution": "fixed", "value": 1}}}).model_dump(mode="json")


def test_the_capacity_of_m_d_c_servers_is_found_at_every_size():
    """With a TTFT limit loose enough not to bind, the capacity of 1, 2 and 4 such replicas is
    their service rate 10 c within the search's tolerance below and the overload margin above."""
    for num_replicas in (1, 2, 4):
        result = capacity_search(_md1(num_replicas), {"ttft_p90_s": 5.0}, SETTINGS_400)
        assert 10 * num_replicas / 1.05 <= result.max_qps <= 10 * num_replicas / 0.95, num_replicas


def _batching(num_replicas: int, router: str) -> dict:
    """vLLM batching (cap 32) of identical requests (128-token prompts, 32 outputs)."""
    return parse_config({
        "max_model_len": 2048, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.0005},
        "scheduler": {"type": "vllm", "num_blocks": 400, "batch_size_cap": 32},
        "cluster": {"num_replicas": num_replicas, "global_scheduler": router},
        "workload": {"prompt_tokens": {"distribution": "fixed", "value": 128},
                     "output_tokens": {"distribution": "fixed", "value": 32}}}).model_dump(mode="json")


TTFT_2S = {"ttft_p90_s": 2.0}
WIDE = SearchSettings(qps_min=0.25, qps_max=256.0, num_requests=400, tolerance=0.05)


def test_two_replicas_carry_about_twice_one_with_a_balancing_router():
    """On a homogeneous workload (the M/D/c replicas above), round robin and least_outstanding
    give 2 replicas between 1.8x and 2.2x the capacity of one."""
    one = capacity_search(_md1(1), {"ttft_p90_s": 5.0}, SETTINGS_400).max_qps
    for router in ("round_robin", "least_outstanding"):
        two = capacity_search(set_path(_md1(2), "cluster.global_scheduler", router), {"ttft_p90_s": 5.0},
                              SETTINGS_400).max_qps
        assert 1.8 <= two / one <= 2.2, router


def test_the_capacity_does_not_move_when_the_probe_length_doubles():
    """vLLM batching under TTFT p90 <= 2 s: 400 and 800 requests per replica give capacities
    within the search's tolerance."""
    short = capacity_search(_batching(1, "round_robin"), TTFT_2S, WIDE).max_qps
    long = capacity_search(_batching(1, "round_robin"), TTFT_2S, WIDE.model_copy(update={"num_requests": 800})).max_qps
    assert abs(long / short - 1) <= WIDE.tolerance


def test_a_short_trace_is_resampled_with_its_seed(tmp_path):
    """A 20-row trace probed with 100 requests: 100 of its rows drawn with replacement, arriving
    after gaps drawn from its own (all 1/q s once rescaled); another seed draws other rows."""
    path = tmp_path / "sizes.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n"
                    + "".join(f"{i}.0,{10 + i},{1 + i}\n" for i in range(20)))
    scenario = parse_config({"workload": {"trace_file": str(path)}}).model_dump(mode="json")
    one = probe_workload(parse_config(probe_scenario(scenario, 4.0, 100)), 100)
    again = probe_workload(parse_config(probe_scenario(scenario, 4.0, 100)), 100)
    other = probe_workload(parse_config(probe_scenario(scenario, 4.0, 100, repeat=1)), 100)
    assert len(one) == 100 and set(one.num_prefill_tokens) <= set(range(10, 30))
    np.testing.assert_array_equal(one.num_decode_tokens, one.num_prefill_tokens - 9)
    np.testing.assert_allclose(one.arrived_at, np.arange(100) / 4.0)
    np.testing.assert_array_equal(one.num_prefill_tokens, again.num_prefill_tokens)
    assert list(one.num_prefill_tokens) != list(other.num_prefill_tokens)


def test_a_trace_shorter_than_the_longest_probe_is_resampled_at_every_length(tmp_path):
    """A trace of 39 rows arriving 1 s apart: its first 10 have 10-token prompts, the other 29
    1,000-token ones. The search's longest probe has 40 requests (10 per replica x
    confirm_length 4), one more than the trace, so the long probes resample it, and so must the
    short one of 10 requests: it is the whole trace (rescaled to 4 req/s) resampled with the
    probe's seed, every gap 1 s / 4 = 0.25 s, its prompts drawn from all 39 rows (playing the
    first 10 rows in order, as before, gave ten 10-token prompts: one window of the trace,
    judged against long probes of all of it). A 40-row trace is as long as the longest probe:
    every probe keeps its first rows, ten 10-token prompts; so does the 39-row trace without
    confirmation (longest probe = 10 requests)."""
    def trace(rows: int) -> dict:
        path = tmp_path / f"window{rows}.csv"
        path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n"
                        + "".join(f"{i}.0,{10 if i < 10 else 1000},2\n" for i in range(rows)))
        return parse_config({"workload": {"trace_file": str(path)}}).model_dump(mode="json")
    short = probe_workload(parse_config(probe_scenario(trace(39), 4.0, 10)), 10, 40)
    whole = build_workload(parse_config(probe_scenario(trace(39), 4.0, 39)))
    np.testing.assert_allclose(short.arrived_at, np.arange(10) * 0.25)
    assert set(short.num_prefill_tokens) == {10, 1000}
    np.testing.assert_array_equal(short.num_prefill_tokens, resample_rows(whole, 10, 42).num_prefill_tokens)
    prefix = probe_workload(parse_config(probe_scenario(trace(40), 4.0, 10)), 10, 40)
    unconfirmed = probe_workload(parse_config(probe_scenario(trace(39), 4.0, 10)), 10, 10)
    for kept in (prefix, unconfirmed):
        np.testing.assert_array_equal(kept.num_prefill_tokens, [10] * 10)
        np.testing.assert_allclose(kept.arrived_at, np.arange(10) * 0.25)


def test_a_probe_resamples_against_the_search_s_longest_probe(tmp_path, monkeypatch):
    """run_probe on 2 replicas with 10 requests per replica and confirm_length 4: the short
    probe has 2 x 10 = 20 requests and tells probe_workload that the longest has 2 x 10 x 4 = 80
    (the long probe itself: 80 and 80)."""
    import sim_core.sweep.probe as probe_module
    seen = []

    def recorded(config, num_requests, longest=0):
        seen.append((num_requests, longest))
        return probe_workload(config, num_requests, longest)
    monkeypatch.setattr(probe_module, "probe_workload", recorded)
    scenario = parse_config({"cluster": {"num_replicas": 2}, "workload": {"trace_file": _trace(tmp_path, 30)}})
    settings_ = SearchSettings(num_requests=10, confirm_length=4)
    for length in (1, 4):
        probe_module.run_probe(scenario.model_dump(mode="json"), 4.0, {"ttft_p90_s": 2.0}, settings_, length=length)
    assert seen == [(20, 80), (80, 80)]


def test_a_resampled_trace_deals_its_gaps_in_rounds(tmp_path):
    """A 3-row trace arriving at 0, 1 and 4 s (gaps 1 and 3 s) resampled to 7 requests: its 6
    gaps are 3 rounds of {1, 3} in some order, so every second arrival is 4 s after the one two
    before (4, 8, 12 s) and the others 1 or 3 s after the one before them; the offered rate is
    the trace's exactly (6 gaps over 12 s)."""
    path = tmp_path / "gaps.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,10,1\n1.0,20,2\n4.0,30,3\n")
    workload = build_workload(parse_config({"workload": {"trace_file": str(path)}}))
    for seed in range(5):
        arrived = resample_rows(workload, 7, seed).arrived_at
        np.testing.assert_array_equal(arrived[::2], [0.0, 4.0, 8.0, 12.0])
        assert set(arrived[1::2] - arrived[:-1:2]) <= {1.0, 3.0}


@given(st.lists(st.floats(0.0, 10.0), min_size=1, max_size=8), st.integers(1, 40), st.integers(0, 99))
@settings(max_examples=50, deadline=None)
def test_dealt_gaps_hold_every_gap_once_a_round(gaps, count, seed):
    dealt = _dealt_gaps(np.array(gaps), count, np.random.default_rng(seed))
    assert len(dealt) == count
    for start in range(0, count - len(gaps) + 1, len(gaps)):
        assert sorted(dealt[start:start + len(gaps)]) == sorted(gaps)


def test_a_probe_has_requests_for_every_replica():
    base = parse_config({"cluster": {"num_replicas": 3}}).model_dump(mode="json")
    pools = parse_config({"disaggregation": {"enabled": True, "prefill": {"num_replicas": 1},
                                             "decode": {"num_replicas": 2}}}).model_dump(mode="json")
    assert (num_probe_requests(base, 400), num_probe_requests(pools, 50)) == (1200, 150)
    ranks = parse_config({"model": "mixtral-8x7b", "device": "h100-sxm", "predictor": {"type": "roofline"},
                          "cluster": {"num_replicas": 2, "data_parallel_size": 2}}).model_dump(mode="json")
    assert num_probe_requests(ranks, 400) == 1600        # 2 replicas x 2 data-parallel ranks, each scheduled alone


def test_reseeded_repeats_widen_the_range_and_lower_the_answer():
    """Capacity 10 with the search's seed, 9.5 with the other seed: the bracket is [9.671,
    10.025]; the repeats fail at both, so the capacity lies between the highest rate every seed
    passed, 9, and 10.025, and the answer is 9."""
    def repeat(qps, k):
        return Probe(qps, qps <= 9.5, {}, () if qps <= 9.5 else ("ttft_p90_s",), k)
    result = bracket_search(threshold(10.0), SETTINGS, repeat)
    repeats = [(round(p.qps, 3), p.passed, p.repeat) for p in result.probes[-2:]]
    assert repeats == [(9.671, False, 1), (10.025, False, 1)]
    assert tuple(round(rate, 3) for rate in result.qps_range) == (9.0, 10.025)
    assert round(result.max_qps, 3) == 9.0 and result.non_monotonic == ()


def test_a_pass_above_a_fail_is_reported():
    """A repeat that fails at the bracket's 9.671 and passes at its 10.025: the pass above the
    fail is reported; 10.025 and 9.671 both have a pass and a fail, so the range runs from
    9 (every seed passed) to 10.392 (every seed failed)."""
    result = bracket_search(threshold(10.0), SETTINGS, lambda qps, k: Probe(qps, qps > 10, {}, (), k))
    assert result.non_monotonic == ("pass at 10.03 req/s above a fail at 9.671",)
    assert tuple(round(rate, 3) for rate in result.qps_range) == (9.0, 10.392)


def test_a_configuration_that_cannot_run_is_infeasible_at_every_rate():
    """Llama-2-70B does not fit one 40 GB GPU: capacity 0, the planner's reason as binding SLO."""
    scenario = parse_config({"model": "llama-2-70b", "device": "a100-40gb"}).model_dump(mode="json")
    result = capacity_search(scenario, {"ttft_p90_s": 2.0}, SETTINGS)
    assert result.max_qps == 0.0 and result.binding_slo.startswith("infeasible: ")
    assert len(result.probes) == 0


def test_a_trace_keeps_its_first_n_rows_rescaled_to_the_probed_rate(tmp_path):
    scenario = parse_config({"workload": {"trace_file": _trace(tmp_path)}}).model_dump(mode="json")
    workload = build_workload(parse_config(probe_scenario(scenario, 4.0, 20)))
    assert len(workload) == 20
    np.testing.assert_allclose(workload.arrived_at, np.arange(20) / 4.0)


def test_synthetic_processes_get_the_probed_mean_rate():
    """poisson sets qps; bursty scales both rates; a diurnal curve is scaled as a whole."""
    base = parse_config({"workload": {"arrival": {"process": "bursty", "qps": 6.0, "off_qps": 0.0,
                                                  "on_s": 10.0, "off_s": 20.0}}}).model_dump(mode="json")
    bursty = probe_scenario(base, 4.0, 50)["workload"]
    assert (bursty["arrival"]["qps"], bursty["arrival"]["off_qps"], bursty["num_requests"]) == (12.0, 0.0, 50)
    curve = parse_config({"workload": {"arrival": {"process": "diurnal", "rate_curve": [1.0, 3.0]}}})
    assert probe_scenario(curve.model_dump(mode="json"), 8.0, 50)["workload"]["arrival"]["rate_curve"] == [4.0, 12.0]
    poisson = probe_scenario(parse_config({}).model_dump(mode="json"), 3.5, 50)
    assert (poisson["workload"]["arrival"]["qps"], poisson["engine"]["record"]) == (3.5, "requests")


def test_judge_lists_violations_worst_first_and_rejections_before_them():
    summary = {key: 0.0 for key in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tbt_p50_s", "tbt_p90_s", "tbt_p99_s",
                                    "e2e_p50_s", "e2e_p90_s", "e2e_p99_s", "scheduling_delay_p99_s",
                                    "throughput_rps", "output_tokens_per_s", "kv_utilization_mean")}
    summary.update(ttft_p90_s=3.0, tbt_p99_s=0.5, num_preemptions=0, num_rejected=0)
    probe = judge(2.0, summary, {"ttft_p90_s": 2.0, "tbt_p99_s": 0.2})
    assert probe.violated == ("tbt_p99_s", "ttft_p90_s") and not probe.passed
    summary.update(num_rejected=3, tbt_p99_s=float("nan"))
    probe = judge(2.0, summary, {"ttft_p90_s": 4.0, "tbt_p99_s": 0.2})
    assert probe.violated == (REJECTED,) and probe.metrics["tbt_p99_s"] is None


def test_overload_needs_a_growing_backlog_and_completions_falling_behind():
    """Backlog growth 0.05 (above 1 - 0.97) with 99 of 100 arrivals completed in the window is a
    trace whose arrivals quicken, not an overload; with 90 of 100 completed it is overloaded; 0.90
    completed with a flat backlog (0.01) is the end of a burst, not a trend."""
    summary = {"ttft_p90_s": 0.1, "num_rejected": 0, "offered_rps": 10.0}
    verdicts = [judge(10.0, {**summary, "backlog_growth": growth, "throughput_rps": served}, {"ttft_p90_s": 1.0})
                for growth, served in ((0.05, 9.9), (0.05, 9.0), (0.01, 9.0))]
    assert [probe.violated for probe in verdicts] == [(), (OVERLOADED,), ()]

def test_a_pd_disaggregated_scenario_is_searched_like_any_other():
    scenario = parse_config({
        "max_model_len": 1024, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.0002},
        "scheduler": {"num_blocks": 200},
        "disaggregation": {"enabled": True, "prefill": {"num_replicas": 1}, "decode": {"num_replicas": 2}},
        "workload": {"prompt_tokens": {"min": 32, "max": 256}, "output_tokens": {"min": 8, "max": 64}}},
    ).model_dump(mode="json")
    result = capacity_search(scenario, {"ttft_p90_s": 0.5}, SearchSettings(num_requests=60, tolerance=0.1))
    assert 0.25 < result.max_qps < 64 and result.binding_slo == "ttft_p90_s"
    assert all(p.passed for p in result.probes if p.qps <= result.max_qps and p.repeat == 0)
    assert not any(p.passed for p in result.probes if p.qps >= result.qps_range[1])
