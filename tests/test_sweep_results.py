"""The results table: what a user sizes a cluster with, per configuration."""

import math

import pytest

from sim_core.sweep.results import results_table


def _record(**changes):
    record = {"key": "k", "values": {"cluster.num_replicas": 2}, "device": "a100-80gb", "num_gpus": 2,
              "max_qps": 10.0, "binding_slo": "tbt_p99_s", "at_capacity": {"output_tokens_per_s": 1000.0},
              "qps_range": [10.0, 10.5], "uncertainty": 0.05, "non_monotonic": ["pass at 11 above a fail at 10.5"],
              "probes": [[10.0, True, {}, [], 0]]}
    return {**record, **changes}


def test_a_row_has_cost_per_million_output_tokens_and_the_uncertainty():
    """2 GPUs at 2.5 USD per hour cost 5 USD per hour; at 1,000 output tokens/s an hour yields
    3.6 million tokens, so a million cost 5 / 3.6 USD; the capacity lies in [10, 10.5] req/s."""
    row = results_table([_record()], ["cluster.num_replicas"], 2.5).iloc[0]
    assert row["cost_per_hour_usd"] == 5.0
    assert row["usd_per_million_output_tokens"] == pytest.approx(5 / 3.6)
    assert (row["qps_low"], row["qps_high"], row["uncertainty"], row["non_monotonic"]) == (10.0, 10.5, 0.05, 1)
    assert row["binding_slo"] == "tbt_p99_s"


def test_a_configuration_without_capacity_has_no_token_cost():
    row = results_table([_record(max_qps=0.0, at_capacity=None, qps_range=[0.0, 0.25], uncertainty=None,
                                 non_monotonic=[])], [], 2.5).iloc[0]
    assert math.isnan(row["usd_per_million_output_tokens"]) and row["qps_high"] == 0.25
