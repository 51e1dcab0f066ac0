"""Goodput: the share of requests meeting every latency limit, as an alternative capacity
criterion (`slo.attainment`)."""

import math

import pandas as pd
import pytest
from test_sweep_search import SETTINGS_400, _md1

from sim_core.errors import ConfigError
from sim_core.sweep import capacity_search, parse_sweep_spec
from sim_core.sweep.goodput import attainment, request_limits
from sim_core.sweep.probe import judge

SLO = {"ttft_p90_s": 2.0, "tbt_p99_s": 0.2}


def test_a_request_attains_when_it_meets_every_limit():
    """Request 0 meets both limits; 1 misses TTFT; 2 misses TPOT; 3 has one output token (no
    TPOT) and meets; 4 was rejected: 2 of 5 attain."""
    requests = pd.DataFrame({"status": ["finished"] * 4 + ["rejected"],
                             "ttft": [1.0, 3.0, 1.0, 2.0, math.nan],
                             "tpot": [0.1, 0.1, 0.3, math.nan, math.nan]})
    assert attainment(requests, {**SLO, "attainment": 0.9}) == pytest.approx(0.4)


def test_the_tightest_limit_of_a_metric_bounds_each_request():
    assert request_limits({"ttft_p50_s": 1.0, "ttft_p99_s": 3.0, "tbt_p99_s": 0.2, "attainment": 0.9}) == {
        "ttft": 1.0, "tpot": 0.2}


def _summary(**values):
    summary = {"num_rejected": 0, "ttft_p90_s": 5.0, "tbt_p99_s": 0.1}
    return {**summary, **values}


def test_attainment_replaces_the_percentile_checks():
    """TTFT p90 is 5 s, over its 2 s limit, yet 92% of the requests attained: the probe passes
    under attainment 0.9 and fails under 0.95, naming slo_attainment."""
    slo = {**SLO, "attainment": 0.9}
    assert judge(3.0, _summary(slo_attainment=0.92), slo).passed
    failed = judge(3.0, _summary(slo_attainment=0.92), {**slo, "attainment": 0.95})
    assert failed.violated == ("slo_attainment",) and failed.metrics["slo_attainment"] == 0.92
    assert judge(3.0, _summary(slo_attainment=0.92), SLO).violated == ("ttft_p90_s",)


def test_attainment_of_p90_finds_the_same_capacity_as_the_p90_limit():
    """90% of requests within 0.5 s is TTFT p90 <= 0.5 s (a quantile is the smallest value with
    at least 90% of the values at or below it): the two verdicts agree at every rate both
    searches probe (the percentile search aims its probes by interpolating TTFT p90 / limit,
    the attainment search bisects), and both answer the same rate."""
    by_percentile = capacity_search(_md1(1), {"ttft_p90_s": 0.5}, SETTINGS_400)
    by_share = capacity_search(_md1(1), {"ttft_p90_s": 0.5, "attainment": 0.9}, SETTINGS_400)
    assert by_share.max_qps == by_percentile.max_qps
    verdicts = {(p.qps, p.length, p.repeat): p.passed for p in by_percentile.probes}
    both = [(p.passed, verdicts[(p.qps, p.length, p.repeat)]) for p in by_share.probes
            if (p.qps, p.length, p.repeat) in verdicts]
    assert len(both) >= 3 and all(share == percentile for share, percentile in both)
    assert by_share.at_capacity["slo_attainment"] >= 0.9


def test_the_spec_checks_the_attainment_share():
    base = {"workload": {"arrival": {"process": "poisson", "qps": 1.0}}}
    with pytest.raises(ConfigError, match=r"slo.attainment: got 1.5; allowed range 0 \(exclusive\) .. 1"):
        parse_sweep_spec({"base": base, "slo": {"ttft_p90_s": 2.0, "attainment": 1.5}})
    with pytest.raises(ConfigError, match="slo: give at least one limit"):
        parse_sweep_spec({"base": base, "slo": {"attainment": 0.9}})
