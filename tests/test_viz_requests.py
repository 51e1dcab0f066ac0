"""Request lifecycles (segments), the timeline's row picking, overview series and helpers."""

import numpy as np
import pandas as pd
import pytest

from sim_core import parse_config, run_simulation
from sim_core.viz.decimate import step_peaks
from sim_core.viz.overview import cdf_points, replica_load, throughput_series
from sim_core.viz.segments import request_segments
from sim_core.viz.timeline import pick_requests, timeline_figure


def _run(requests: list[tuple[float, int, int]], **scheduler):
    """A linear-cost run (stage time 0.01 s + 0.001 s per token) of explicit requests."""
    from sim_core.workload import Workload

    arrived, prefill, decode = (np.array(col) for col in zip(*requests))
    workload = Workload(arrived.astype(float), prefill.astype(np.int64), decode.astype(np.int64), "test")
    config = parse_config({"model": "llama-2-7b", "device": "a100-80gb", "engine": {"record": "full"},
                           "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
                           "scheduler": {"type": "vllm", **scheduler}})
    return run_simulation(config, workload)


def _rows(segments: pd.DataFrame, request: int) -> list[tuple]:
    mine = segments[segments["request"] == request]
    return [(k, round(s, 6), round(e, 6)) for k, s, e in zip(mine["kind"], mine["start"], mine["end"])]


def test_a_lone_request_is_one_prefill_then_decode_until_it_finishes():
    # prompt 10 tokens: 0.01 + 10 x 0.001 = 0.02 s; then 2 decode steps of 0.011 s
    run = _run([(0.0, 10, 3)])
    assert _rows(request_segments(run, [0]), 0) == [("prefill", 0.0, 0.02), ("decode", 0.02, 0.042)]


def test_a_request_that_finds_no_slot_waits_then_runs():
    # batch_size_cap 1: request 1 waits for request 0 to finish at 0.042
    run = _run([(0.0, 10, 3), (0.0, 10, 3)], batch_size_cap=1)
    segments = request_segments(run, [0, 1])
    assert _rows(segments, 1) == [("waiting", 0.0, 0.042), ("prefill", 0.042, 0.062), ("decode", 0.062, 0.084)]


def test_a_preempted_request_shows_each_gap_and_each_recomputed_prefill():
    # 4 blocks of 4 tokens: both 4-token prompts fit, both cannot grow. vLLM preempts request 1
    # whenever request 0 needs its block, and request 1 recomputes 6, 7, 8 then 9 tokens.
    run = _run([(0.0, 4, 8), (0.0, 4, 8)], block_size=4, num_blocks=4, watermark_blocks_fraction=0.0)
    assert run.requests["num_restarts"].tolist() == [0, 4]
    assert _rows(request_segments(run, [1]), 1) == [
        ("prefill", 0.0, 0.018), ("decode", 0.018, 0.03),
        ("preempted", 0.03, 0.041), ("prefill", 0.041, 0.057),      # 0.01 + 6 x 0.001
        ("preempted", 0.057, 0.068), ("prefill", 0.068, 0.085),
        ("preempted", 0.085, 0.096), ("prefill", 0.096, 0.114),
        ("preempted", 0.114, 0.147), ("prefill", 0.147, 0.166), ("decode", 0.166, 0.188)]


def test_rows_are_filtered_and_sorted_with_missing_latencies_last():
    requests = pd.DataFrame({"request_id": [0, 1, 2, 3], "replica_id": [0, 1, 0, 0],
                             "ttft": [0.2, 0.9, np.nan, 0.5], "num_restarts": [0, 2, 0, 1]})
    assert pick_requests(requests, "slowest TTFT")["request_id"].tolist() == [1, 3, 0, 2]
    assert pick_requests(requests, "slowest TTFT", replica=0, limit=2)["request_id"].tolist() == [3, 0]
    assert pick_requests(requests, "arrival", restarted_only=True)["request_id"].tolist() == [1, 3]


def test_the_timeline_draws_one_trace_per_kind_and_bands_the_selected_row():
    run = _run([(0.0, 10, 3), (0.0, 10, 3)], batch_size_cap=1)
    figure = timeline_figure(run, pick_requests(run.requests), selected=1)
    assert [trace.name for trace in figure.data] == ["waiting", "prefill", "decode", "finished"]
    assert list(figure.layout.yaxis.categoryarray) == ["#1", "#0"]
    assert figure.layout.shapes[0].y0 == -0.5                      # row #1 is at the bottom (index 0)


def test_cdf_points_sort_finite_values_and_count_fractions():
    xs, ys = cdf_points(np.array([3.0, 1.0, np.nan, 2.0]))
    assert xs.tolist() == [1.0, 2.0, 3.0] and ys.tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    xs, ys = cdf_points(np.arange(10_000, dtype=float), max_points=100)
    assert len(xs) == 100 and xs[-1] == 9999 and ys[-1] == 1.0


def test_step_peaks_keeps_the_largest_value_of_each_bin():
    times = np.arange(10, dtype=float)
    values = np.array([0, 5, 1, 1, 9, 0, 0, 2, 0, 0])
    xs, ys = step_peaks(times, values, max_points=5)
    assert xs.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0] and ys.tolist() == [5, 1, 9, 2, 0]
    assert step_peaks(times, values, max_points=20)[1].tolist() == values.tolist()


def test_throughput_and_replica_load_count_what_finished_where():
    run = _run([(0.0, 10, 3), (0.0, 10, 3)], batch_size_cap=1)
    series = throughput_series(run, bin_s=0.05)
    assert series["time"].tolist() == pytest.approx([0.0, 0.05])
    assert series["requests_per_s"].tolist() == [20.0, 20.0]      # one finish per 0.05 s bin
    assert series["output_tokens_per_s"].sum() * 0.05 == 4         # 2 decode tokens each
    load = replica_load(run)
    assert load[["replica", "requests", "prompt_tokens", "output_tokens"]].values.tolist() == [[0, 2, 20, 6]]


def test_replica_load_figure_puts_request_and_token_shares_on_one_percent_axis():
    from sim_core.viz.overview import replica_load_figure
    from sim_core.workload import Workload

    # round robin over 2 replicas: requests 0 and 2 (10 + 30 prompt tokens) go to replica 0,
    # request 1 (20 prompt tokens) to replica 1; 3 output tokens each
    workload = Workload(np.zeros(3), np.array([10, 20, 30]), np.array([3, 3, 3]), "test")
    config = parse_config({"model": "llama-2-7b", "device": "a100-80gb", "cluster": {"num_replicas": 2},
                           "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001}})
    figure = replica_load_figure(run_simulation(config, workload))
    bars = {trace.name: list(trace.y) for trace in figure.data}
    assert bars["share of requests"] == pytest.approx([2 / 3, 1 / 3])
    assert bars["share of tokens"] == pytest.approx([46 / 69, 23 / 69])
    assert len(bars["mean KV use"]) == 2
    assert figure.layout.shapes[0].y0 == 0.5 and figure.layout.yaxis.tickformat == ".0%"
