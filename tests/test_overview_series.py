"""The Overview simulates at `engine.record: series` (issue 20, item 4): every number and chart it
shows must be what a `full` (or `batches`) run of the same scenario gives, since the page takes
whichever of them is cached. Each view the page builds is compared as the page sends it: the
figures' JSON, the tables, the summary and the notes."""

from __future__ import annotations

import copy

import pandas as pd
import pytest

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.export.run_files import output_files
from sim_core.results.overload import queue_trend
from sim_core.results.record import BATCH_SUMMARY, LEVELS, keeps
from sim_core.scenarios.defaults import DEFAULT_SCENARIO
from sim_core.viz.overview import blocks_text, queue_figure, replica_load_views, run_latency_cdfs, throughput_figure


def variant(num_requests: int, **sections) -> dict:
    """The app's default scenario with `num_requests` and sections replaced or merged."""
    data = copy.deepcopy(DEFAULT_SCENARIO)
    data["workload"]["num_requests"] = num_requests
    for name, value in sections.items():
        data[name] = {**data[name], **value} if isinstance(value, dict) and isinstance(data.get(name), dict) else value
    return data


SCENARIOS = {
    "default": variant(400),
    "overloaded, vllm_v0 swapping": variant(300, scheduler={"type": "vllm_v0", "block_size": 16, "num_blocks": 200,
                                                           "preemption_mode": "swap"},
                                            workload={**DEFAULT_SCENARIO["workload"], "num_requests": 300,
                                                      "arrival": {"process": "poisson", "qps": 40.0}}),
    "pipeline parallel": variant(200, cluster={"pipeline_parallel_size": 2}),
    "vllm_v1 async steps": variant(300, scheduler={"type": "vllm_v1", "block_size": 16, "async_scheduling": True}),
    "sglang": variant(300, scheduler={"type": "sglang"}),
    "P/D disaggregation": variant(200, disaggregation={"enabled": True}),
}


def overview(run) -> dict:
    """What the Overview page shows of a run (pages/overview.py), as comparable values."""
    load, load_figure = replica_load_views(run)
    return {"summary": run.summary, "notes": run.notes, "blocks": blocks_text(run), "trend": queue_trend(run),
            "arrivals": run.requests["arrived_at"].tolist(), "load": load.to_dict("list"),
            **{name: figure.to_json() for name, figure in (
                ("cdfs", run_latency_cdfs(run)), ("throughput", throughput_figure(run)),
                ("queues", queue_figure(run)), ("load_figure", load_figure))}}


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_overview_from_series_equals_it_from_every_fuller_level(name):
    data = SCENARIOS[name]
    runs = {level: run_simulation(parse_config({**data, "engine": {"record": level}}))
            for level in LEVELS if keeps(level, "series")}
    shown = {level: overview(run) for level, run in runs.items()}
    assert shown["series"] == shown["batches"] == shown["full"]
    assert len(runs["series"].batches) == runs["full"].summary["num_batches"] > 0


@pytest.mark.parametrize("name", SCENARIOS)
def test_series_keeps_the_batch_summary_and_the_series_as_full_does(name):
    """The tables `series` keeps are `full`'s, row for row (the batch table's summary columns
    and completion times); the cost-model breakdown, block and state events are left out."""
    series, full = (run_simulation(parse_config({**SCENARIOS[name], "engine": {"record": level}}))
                    for level in ("series", "full"))
    assert list(series.batches.columns) == [*BATCH_SUMMARY, "completed_at"]
    pd.testing.assert_frame_equal(series.batches, full.batches[series.batches.columns])
    for table in ("requests", "batch_stages", "timeseries", "transfers", "kv_offload"):
        pd.testing.assert_frame_equal(getattr(series, table), getattr(full, table))
    assert series.operator_times.empty and series.block_events.empty and series.state_events.empty
    assert series.cache_ops.empty and not full.operator_times.empty


def test_levels_keep_what_the_leaner_ones_keep():
    """`keeps(level, least)`: full keeps everything, requests only itself; series sits between."""
    assert [level for level in LEVELS if keeps(level, "series")] == ["series", "batches", "full"]
    assert [level for level in LEVELS if keeps("series", level)] == ["requests", "series"]


def test_outputs_of_a_series_run_are_refused_with_the_level_named():
    """The CLI's files need the batches' members; a series run says so instead of failing on a
    missing column."""
    run = run_simulation(parse_config({**variant(20), "engine": {"record": "series"}}))
    with pytest.raises(ConfigError, match="engine.record 'series'"):
        output_files(run)


def test_the_trace_and_batches_writers_refuse_a_series_run_as_output_files_does(tmp_path):
    """Each way to the batches table or the Chrome trace (the Pipeline page's downloads, the
    library's writers) raises the same ConfigError naming the level, not a KeyError on the
    missing member lists, and writes no file; the requests table needs no members and is
    written."""
    from sim_core.export import batches_csv, chrome_trace, chrome_trace_bytes, requests_csv, write_chrome_trace

    run = run_simulation(parse_config({**variant(20), "engine": {"record": "series"}}))
    with pytest.raises(ConfigError) as expected:
        output_files(run)
    refusals = [lambda: chrome_trace(run), lambda: chrome_trace_bytes(run), lambda: chrome_trace_bytes(run, gzip=True),
                lambda: write_chrome_trace(run, tmp_path / "trace.json"), lambda: batches_csv(run)]
    for refusal in refusals:
        with pytest.raises(ConfigError) as raised:
            refusal()
        assert str(raised.value) == str(expected.value)
    assert list(tmp_path.iterdir()) == []
    assert requests_csv(run).count("\n") == 21   # header and 20 requests


def test_a_series_recorder_takes_decode_runs_by_their_counts_alone():
    """At `series` a decode run's rows come as live-member counts (on_run_batch_counts: three
    formations of 4, 4 and 3 live members, three rows); the full-row call is a bug there and
    says so rather than filling the summary table's columns with the wrong values."""
    import numpy as np

    from sim_core.results.record import Recorder

    recorder = Recorder("series", 1)
    recorder.on_run_batch_counts(np.arange(3), 0, np.array([0.0, 0.1, 0.2]), np.array([4, 4, 3]))
    assert recorder.held_rows() == (0, 3, 0)
    with pytest.raises(AssertionError, match="on_run_batch_counts"):
        recorder.on_run_batches(1, np.arange(1), 0, np.zeros(1), 1, 1, 0, 1, np.zeros(1), (0,), (1,), 1)
