"""Overview polish (issue 19 item 4): units that switch, legends outside the plots, zero-based
axes, metrics that fit, and a banner when the queue trend says the run is over capacity."""

import copy
import json

import pandas as pd
from app_helpers import TINY, open_app

from sim_core import parse_config, run_simulation
from sim_core.results.overload import waiting_trend
from sim_core.viz.overview import latency_cdfs, queue_figure, replica_load_figure, throughput_figure
from sim_core.viz.units import duration_text, duration_unit


def test_durations_switch_from_ms_to_s_min_and_h_with_three_significant_digits():
    """The issue's 1,052,793 ms reads as 17.5 min; each unit takes over at 1 s, 2 min and 2 h."""
    assert duration_text(1052.793) == "17.5 min"
    assert duration_text(0.0644) == "64.4 ms"
    assert duration_text(0.0052) == "5.20 ms"
    assert duration_text(0.999) == "999 ms"
    assert duration_text(1.0) == "1.00 s"
    assert duration_text(119.0) == "119 s"
    assert duration_text(120.0) == "2.00 min"
    assert duration_text(9000.0) == "2.50 h"
    assert duration_text(float("nan")) == "-"
    assert duration_unit(45.0) == ("s", 1.0)


def test_the_queue_trend_compares_the_queue_at_the_middle_and_the_end_of_the_arrivals():
    """Two replicas' step series summed at t=5 and t=10: 3+4 waiting, then 30+9; a rise of 32
    requests in 5 s is over capacity (threshold 20), a rise of 19 is not."""
    rows = pd.DataFrame({"time": [0.0, 4.0, 9.0, 0.0, 5.0, 10.0], "replica_id": [0, 0, 0, 1, 1, 1],
                         "num_waiting": [1, 3, 30, 0, 4, 9]})
    trend = waiting_trend(rows, 0.0, 10.0, 100)
    assert (trend.waiting_mid, trend.waiting_end, trend.threshold) == (7, 39, 20)
    assert trend.growth_per_s == 6.4 and trend.over_capacity
    calm = waiting_trend(rows.assign(num_waiting=[1, 3, 17, 0, 4, 9]), 0.0, 10.0, 100)
    assert (calm.waiting_end, calm.over_capacity) == (26, False)
    assert waiting_trend(rows, 0.0, 10.0, 1000).threshold == 50    # 5% of the requests when that is more


def test_overview_figures_keep_legends_below_the_plot_and_axes_from_zero():
    """No legend sits over the data (all anchored below the plot) and every value axis starts at 0."""
    result = run_simulation(parse_config(TINY))
    for figure in (throughput_figure(result), queue_figure(result), replica_load_figure(result)):
        layout = json.loads(figure.to_json())["layout"]
        assert layout["legend"]["yanchor"] == "top" and layout["legend"]["y"] < 0
        assert layout["yaxis"]["rangemode"] == "tozero"
    throughput = json.loads(throughput_figure(result).to_json())["layout"]
    assert (throughput["yaxis2"]["rangemode"], throughput["xaxis"]["ticksuffix"]) == ("tozero", " s")


def test_cdf_panels_take_the_unit_of_their_largest_latency():
    """TTFTs up to 2 s read in s, worst TBTs of at most 40 ms in ms, end-to-end up to 3 min in min."""
    requests = pd.DataFrame({"status": ["finished"] * 3, "ttft": [0.5, 1.0, 2.0], "tpot": [0.01, 0.02, 0.03],
                             "tbt_max": [0.02, 0.03, 0.04], "e2e": [60.0, 120.0, 180.0]})
    figure = json.loads(latency_cdfs({"run": requests}).to_json())
    titles = [figure["layout"][axis]["title"]["text"] for axis in ("xaxis", "xaxis2", "xaxis3", "xaxis4")]
    assert titles == ["TTFT (s)", "TPOT (mean TBT) (ms)", "worst TBT (ms)", "end-to-end (min)"]
    assert list(latency_cdfs({"run": requests}).data[3].x) == [1.0, 2.0, 3.0]


def test_overview_metrics_come_four_to_a_row_with_switching_units():
    """The tiny run's TTFT p50 / p99 (64 ms and 3.3 s) each read in their own unit; no over-capacity
    banner at 6 req/s for 40 requests."""
    app = open_app("pages/overview.py")
    metrics = {m.label: m.value for m in app.metric}
    assert list(metrics)[:8] == ["Throughput (req/s)", "Output tokens/s", "TTFT p50 / p99", "TBT p50 / p99",
                                 "E2E p50 / p99", "TTFT p90", "TBT p90", "Scheduling delay p99"]
    assert metrics["TTFT p50 / p99"] == "64.4 ms / 3.31 s"
    assert metrics["KV blocks / replica"] == "64"
    assert not app.warning


def test_an_overloaded_run_carries_an_over_capacity_banner():
    """60 req/s on the tiny cluster: the waiting queue grows while requests arrive, and the page says so."""
    scenario = copy.deepcopy(TINY)
    scenario["workload"].update(num_requests=400, arrival={"process": "poisson", "qps": 60.0})
    app = open_app("pages/overview.py", scenario)
    assert app.warning[0].value.startswith("Over capacity: the waiting queue grew from ")
