"""Reading sweep results: Pareto fronts, best per objective, fewest GPUs for a target rate, and
the capacity figures built from them."""

import json
import math

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from sim_core.sweep.pareto import best_per_objective, min_gpus_for, pareto_mask
from sim_core.viz.capacity import pareto_figure, probe_figure

KEYS = ["scheduler.type", "cluster.num_replicas"]


def table(*rows) -> pd.DataFrame:
    """rows: (type, replicas, max_qps, tbt_p99_s) with 1 GPU per replica at $2 per GPU-hour."""
    frame = pd.DataFrame(rows, columns=[*KEYS, "max_qps", "tbt_p99_s"])
    frame["num_gpus"] = frame["cluster.num_replicas"]
    frame["cost_per_hour_usd"] = 2.0 * frame["num_gpus"]
    frame["qps_per_usd"] = frame["max_qps"] / frame["cost_per_hour_usd"]
    frame["qps_per_gpu"] = frame["max_qps"] / frame["num_gpus"]
    frame["ttft_p90_s"] = 0.5
    return frame


def test_the_front_keeps_points_nothing_beats_on_both_axes():
    """Cost (lower is better) against capacity (higher is better): C and D are beaten by B, the
    duplicate of A stays with it, a NaN point is never on the front."""
    cost = [1, 2, 2, 3, 4, 1, np.nan]
    capacity = [1, 3, 2, 3, 5, 1, 9]
    assert pareto_mask(cost, capacity, "min", "max").tolist() == [True, True, False, False, True, True, False]


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=30))
def test_the_front_is_exactly_the_undominated_points(points):
    xs, ys = np.array(points, dtype=float).T
    front = pareto_mask(xs, ys, "min", "max")
    for i in range(len(points)):
        dominated = any(xs[j] <= xs[i] and ys[j] >= ys[i] and (xs[j] < xs[i] or ys[j] > ys[i])
                        for j in range(len(points)))
        assert front[i] == (not dominated)


def test_best_per_objective_ignores_configurations_that_serve_nothing():
    results = table(("vllm", 1, 4.0, 0.05), ("sarathi", 1, 6.0, 0.09), ("vllm", 2, 10.0, 0.04), ("orca", 1, 0.0, 0.01))
    best = best_per_objective(results, KEYS).set_index("objective")
    assert best.loc["highest capacity", "configuration"] == "type=vllm, num_replicas=2"
    assert best.loc["most QPS per dollar", "value"] == 3.0
    assert best.loc["most QPS per GPU", "configuration"] == "type=sarathi, num_replicas=1"
    assert best.loc["lowest TBT p99 at capacity", "configuration"] == "type=vllm, num_replicas=2"


def test_fewest_gpus_for_a_target_rate():
    results = table(("vllm", 1, 4.0, 0.05), ("sarathi", 1, 6.0, 0.09), ("vllm", 2, 10.0, 0.04),
                    ("sarathi", 2, 12.0, 0.1))
    answer = min_gpus_for(results, 5.0)
    assert answer.text(5.0, KEYS) == ("1 GPU(s): type=sarathi, num_replicas=1 serves 6 req/s >= 5 within the SLOs "
                                      "($2.00/h)")
    assert min_gpus_for(results, 9.0).row["max_qps"] == 12.0       # same GPUs and cost: the higher capacity
    estimate = min_gpus_for(results, 30.0)
    assert (estimate.row, estimate.copies) == (None, 5)
    assert estimate.text(30.0, KEYS) == ("no configuration reaches 30 req/s alone; about 5 GPU(s) as 5 copies of "
                                         "type=sarathi, num_replicas=1 (6 req/s each), assuming copies add their "
                                         "capacities")
    assert "serves any load" in min_gpus_for(table(("orca", 1, 0.0, 0.1)), 1.0).text(1.0, KEYS)


def test_pareto_figure_draws_the_front_as_one_trace_and_the_rest_as_another():
    results = table(("vllm", 1, 4.0, 0.05), ("sarathi", 1, 3.0, 0.09), ("vllm", 2, 10.0, 0.04), ("orca", 1, 0.0, 0.01))
    figure = json.loads(pareto_figure(results, KEYS, "capacity vs cost").to_json())
    dominated, front = figure["data"]
    assert front["name"] == "Pareto front"
    assert front["text"] == ["type=vllm, num_replicas=1", "type=vllm, num_replicas=2"]
    assert dominated["text"] == ["type=sarathi, num_replicas=1"]
    assert figure["layout"]["xaxis"]["title"]["text"] == "cost (USD per hour)"


def test_probe_figure_colours_passes_and_failures_and_marks_the_capacity():
    """Issue 19 item 9: each kind of dot has a legend entry, the answer is a labelled line, and the
    log axis spans the probes 1..64 req/s (not up to 1M req/s)."""
    record = {"max_qps": 8.0, "probes": [[64.0, False, {}, ["ttft_p90_s"]], [1.0, True, {}, []],
                                         [8.0, True, {}, []], [16.0, False, {}, ["ttft_p90_s"]]]}
    built = probe_figure(record, {"ttft_p90_s": 2.0})
    figure = json.loads(built.to_json())
    names = [trace["name"] for trace in figure["data"]]
    assert names == ["search order", "meets every SLO", "misses an SLO", "capacity 8 req/s"]
    met, missed = built.data[1], built.data[2]
    assert (list(met.y), list(met.text)) == ([2, 3], ["meets ttft_p90_s", "meets ttft_p90_s"])
    assert (list(missed.y), list(missed.text)) == ([1, 4], ["misses: ttft_p90_s", "misses: ttft_p90_s"])
    assert list(built.data[3].x) == [8.0, 8.0]
    low, high = figure["layout"]["xaxis"]["range"]
    assert (round(low, 6), round(high, 6)) == (-0.15, round(math.log10(64) + 0.15, 6))
    assert figure["layout"]["legend"]["y"] < 0


def test_probe_figure_draws_confirming_probes_as_diamonds():
    """A record with a 4x confirming probe (the sixth field): it is a diamond and says so on hover."""
    record = {"max_qps": 8.0, "probes": [[16.0, False, {}, ["tbt_p99_s"], 0, 1], [8.0, True, {}, [], 0, 1],
                                         [8.0, False, {}, ["tbt_p99_s"], 0, 4]]}
    built = probe_figure(record, {"tbt_p99_s": 0.2})
    met, missed = built.data[1], built.data[2]
    assert list(met.marker.symbol) == ["circle"]
    assert list(missed.marker.symbol) == ["circle", "diamond"]
    assert missed.text[1] == "misses: tbt_p99_s<br>confirming probe, 4x longer"


def test_probe_figure_notes_a_failure_that_the_reseeded_probe_overruled():
    """A short probe at 9 fails on overload alone with a shortfall of 0.05 within its backlog's
    fluctuation (scatter 0.01: 0.05 - 2 x sqrt(2) x 0.01 < 0.03, doubtful), and its seed +1
    right after passes (pooled growth (0.06 - 0.02) / 2 = 0.02, not overloaded): the failure is
    overruled and says so on hover. The failure at 16 is beyond doubt and says nothing more."""
    doubtful = {"throughput_rps": 8.55, "offered_rps": 9.0, "backlog_spread": 0.01, "backlog_growth": 0.06}
    kept_up = {"throughput_rps": 9.0, "offered_rps": 9.0, "backlog_spread": 0.01, "backlog_growth": -0.02}
    record = {"max_qps": 9.0, "probes": [[16.0, False, {}, ["overloaded"], 0, 1],
                                         [9.0, False, doubtful, ["overloaded"], 0, 1], [9.0, True, kept_up, [], 1, 1]]}
    figure = json.loads(probe_figure(record, {"ttft_p90_s": 2.0}).to_json())
    missed = figure["data"][2]
    assert missed["text"] == ["misses: overloaded", "misses: overloaded<br>overruled by seed +1"]
