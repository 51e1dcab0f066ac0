"""Capacity search: it brackets a known capacity, on a rule and on a real simulation, and each
probe is the scenario at the probed rate."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core import parse_config
from sim_core.sweep import SearchSettings, bracket_search, capacity_search
from sim_core.sweep.probe import REJECTED, Probe, judge, probe_scenario
from sim_core.sweep.search import NO_LIMIT
from sim_core.workload import build_workload

SETTINGS = SearchSettings(qps_min=0.25, qps_max=64.0, num_requests=100, tolerance=0.05)


def threshold(capacity: float, served: float | None = None):
    """A system that meets its SLO at every rate up to `capacity` and serves `served` req/s
    (default 1.2 x capacity) when overloaded."""
    served = 1.2 * capacity if served is None else served
    return lambda qps: Probe(qps, qps <= capacity, {"throughput_rps": served},
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


def test_a_good_guess_brackets_in_few_probes():
    """qps_max fails, the throughput guess (12) fails, half of it passes, then geometric
    bisection of [6, 12]: 8.485 passes, 10.09 fails, 9.253 and 9.663 pass; 10.09 / 9.663 < 1.05."""
    result = bracket_search(threshold(10.0), SETTINGS)
    assert [round(p.qps, 3) for p in result.probes] == [64.0, 12.0, 6.0, 8.485, 10.091, 9.253, 9.663]
    assert result.max_qps == result.probes[-1].qps


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


def test_real_simulation_brackets_the_capacity_of_a_one_at_a_time_server(tmp_path):
    """One request at a time (batch cap 1), each 90 prompt tokens and 1 output token: service
    s = 10 ms + 90 x 1 ms = 0.1 s. Arrivals every 1/q s: above 10 req/s request i waits
    i x (s - 1/q), so TTFT p90 (the 90th of 100, i = 89) = s + 89 (s - 1/q). With the limit
    s + 89 x 0.02 = 1.88 s the capacity is exactly 1 / (0.1 - 0.02) = 12.5 req/s."""
    scenario = parse_config({
        "max_model_len": 1024, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
        "scheduler": {"type": "vllm", "batch_size_cap": 1, "num_blocks": 64},
        "workload": {"trace_file": _trace(tmp_path)}}).model_dump(mode="json")
    result = capacity_search(scenario, {"ttft_p90_s": 1.88}, SETTINGS)
    assert 12.5 / 1.05 < result.max_qps <= 12.5
    assert result.binding_slo == "ttft_p90_s"
    for probe in result.probes:
        assert probe.passed == (probe.qps <= 12.5)
        expected = 0.1 if probe.qps <= 10 else 0.1 + 89 * (0.1 - 1 / probe.qps)
        assert math.isclose(probe.metrics["ttft_p90_s"], expected, rel_tol=1e-9)


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


def test_a_pd_disaggregated_scenario_is_searched_like_any_other():
    scenario = parse_config({
        "max_model_len": 1024, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.0002},
        "scheduler": {"num_blocks": 200},
        "disaggregation": {"enabled": True, "prefill": {"num_replicas": 1}, "decode": {"num_replicas": 2}},
        "workload": {"prompt_tokens": {"min": 32, "max": 256}, "output_tokens": {"min": 8, "max": 64}}},
    ).model_dump(mode="json")
    result = capacity_search(scenario, {"ttft_p90_s": 0.5}, SearchSettings(num_requests=60, tolerance=0.1))
    assert 0.25 < result.max_qps < 64 and result.binding_slo == "ttft_p90_s"
    assert all(p.passed == (p.qps <= result.max_qps) for p in result.probes)
