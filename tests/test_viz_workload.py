"""Workload figures and the report, built without Streamlit."""

import numpy as np

from sim_core.viz import (
    arrival_rate_figure,
    length_histogram_figure,
    length_scatter_figure,
    report_rows,
)
from sim_core.workload import Workload


def workload(n=10):
    return Workload(np.arange(n, dtype=float), np.arange(1, n + 1) * 10, np.full(n, 5), "test", ("a note",))


def test_arrival_rate_bins_count_requests_per_second():
    figure = arrival_rate_figure(workload(10), num_bins=3)   # 10 arrivals over 9 s, bins of 3 s
    assert figure.data[0].y.tolist() == [1.0, 1.0, 4 / 3]
    assert sum(figure.data[0].y * 3) == 10


def test_length_histograms_hold_every_request_once_per_kind():
    figure = length_histogram_figure(workload(10), num_bins=4)
    assert [trace.name for trace in figure.data] == ["prompt", "output"]
    assert [int(sum(trace.y)) for trace in figure.data] == [10, 10]


def test_prompt_and_output_histograms_each_have_their_own_axis():
    """Issue 19 item 7: prompts of 10..100 tokens span their panel, outputs of 5 tokens theirs."""
    figure = length_histogram_figure(workload(10), num_bins=4)
    assert [(trace.xaxis, trace.yaxis) for trace in figure.data] == [("x", "y"), ("x2", "y2")]
    assert (figure.layout.xaxis.title.text, figure.layout.xaxis2.title.text) == ("prompt tokens", "output tokens")
    assert figure.data[0].x.tolist() == [21.25, 43.75, 66.25, 88.75]    # bins of 22.5 tokens from 10 to 100


def test_the_scatter_samples_large_workloads_and_says_so():
    figure = length_scatter_figure(workload(50), max_points=20)
    assert len(figure.data[0].x) == 20
    assert figure.layout.title.text == "Prompt vs output length (20 of 50 shown)"


def test_report_rows_list_shape_and_notes():
    rows = {r["item"]: r["value"] for r in report_rows(workload(10), "canonical")}
    assert rows == {"format": "canonical", "requests": "10", "span": "9.000 s", "mean rate": "1 req/s",
                    "prompt tokens": "10 .. 100 (mean 55)", "output tokens": "5 .. 5 (mean 5)",
                    "extra columns": "none", "note": "a note"}
