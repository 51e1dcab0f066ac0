"""Thinning before the browser (sim_core/viz/decimate.py and the Pipeline Gantt): what survives
is exact where a reader looks (peaks, idle gaps of a pixel or more, counts and busy time)."""

import numpy as np
import pandas as pd
from app_helpers import TINY

import sim_core.viz.gantt as gantt
from sim_core import parse_config, run_simulation
from sim_core.viz.decimate import close_runs, step_peaks


def test_step_peaks_keep_the_first_point_and_each_bins_largest_value():
    """Ten points into 5 bins of [0, 9] (edges 0, 1.8, 3.6, 5.4, 7.2, 9): the bins start at
    points 0, 2, 4, 6, 8 and keep max(1, 5) = 5, max(2, 0) = 2, max(3, 9) = 9, max(0, 0) = 0 and
    max(4, 1) = 4; the series' peak 9 survives."""
    times, values = np.arange(10.0), np.array([1, 5, 2, 0, 3, 9, 0, 0, 4, 1])
    xs, ys = step_peaks(times, values, max_points=5)
    assert xs.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert ys.tolist() == [5, 2, 9, 0, 4]
    assert step_peaks(times, values, max_points=10)[1].tolist() == values.tolist()   # short: unchanged


def test_close_runs_join_bars_less_than_min_gap_apart_on_one_lane():
    """min_gap 0.125 (binary-exact times). Lane 0: [0, 1], [1, 1.0625] (gap 0), [1.125, 2] (gap
    0.0625) form run 0; [3, 3.5] (gap 1) starts run 1. Lane 1 starts run 2 with [0, 0.25];
    [0.375, 0.5] is 0.125 after it, not less than min_gap: run 3."""
    runs = close_runs(np.array([0, 0, 0, 0, 1, 1]), np.array([0.0, 1.0, 1.125, 3.0, 0.0, 0.375]),
                      np.array([1.0, 1.0625, 2.0, 3.5, 0.25, 0.5]), min_gap=0.125)
    assert runs.tolist() == [0, 0, 0, 1, 2, 3]


def test_thin_stages_merge_runs_above_max_bars_and_keep_lone_stages(monkeypatch):
    """MAX_BARS 3, five stages in a 150 s window (a pixel: 150 / 1500 = 0.1 s). Replica 0 stage 0
    runs [0, 1], [1.05, 2], [2, 3] (gaps 0.05 and 0, under a pixel): one merged bar 0..3 of 3
    stages busy 1 + 0.95 + 1 = 2.95 s; its [50, 51] and stage 1's [0.5, 1.5] stay alone."""
    monkeypatch.setattr(gantt, "MAX_BARS", 3)
    stages = pd.DataFrame({"batch_id": [0, 1, 2, 3, 4], "replica_id": [0, 0, 0, 0, 0], "stage_id": [0, 1, 0, 0, 0],
                           "start": [0.0, 0.5, 1.05, 2.0, 50.0], "end": [1.0, 1.5, 2.0, 3.0, 51.0]})
    singles, merged = gantt.thin_stages(stages, 0.0, 150.0)
    assert sorted(singles["batch_id"].tolist()) == [1, 4]
    assert merged[["replica_id", "stage_id", "start", "end", "num_stages"]].values.tolist() == [[0, 0, 0.0, 3.0, 3]]
    assert merged["busy_s"].tolist() == [2.95]
    kept, none = gantt.thin_stages(stages.head(3), 0.0, 150.0)      # at most MAX_BARS: unchanged
    assert len(kept) == 3 and none.empty


def test_a_thinned_gantt_draws_every_stage_once_and_says_so(monkeypatch):
    """With MAX_BARS 400 the whole TINY run (about 3,000 stages) is thinned: the lone bars plus
    the stages inside the merged bars add up to every stage of the run, and the note above the
    chart gives that total."""
    monkeypatch.setattr(gantt, "MAX_BARS", 400)
    result = run_simulation(parse_config(TINY))
    total = len(result.batch_stages)
    figure = gantt.pipeline_gantt(result, 0.0, float(result.batch_stages["end"].max()))
    merged = [trace for trace in figure.data if trace.name.startswith("batches under 1 px")]
    lone = sum(len(trace.y) for trace in figure.data if trace.name in gantt.KIND_COLORS)
    in_merged = int(sum(row[0] for row in merged[0].customdata))
    assert total > 400 and lone + in_merged == total
    note = figure.layout.annotations[0].text
    assert note.startswith(f"{total:,} batch stages: {lone:,} drawn alone") and "not drawn" not in note
