"""Long runs free finished requests and fold token gaps as they go, without changing results."""

import numpy as np
import pandas as pd
import pytest

from sim_core import parse_config, run_simulation
from sim_core.engine import simulator
from sim_core.results import record

BASE = {"seed": 3, "max_model_len": 2048, "predictor": {"type": "linear"},
        "workload": {"num_requests": 300, "arrival": {"process": "gamma", "qps": 30, "cv": 3},
                     "prompt_tokens": {"distribution": "uniform", "min": 16, "max": 1500},
                     "output_tokens": {"distribution": "zipf", "min": 1, "max": 400}}}


@pytest.mark.parametrize("case", [
    {"scheduler": {"type": "vllm", "num_blocks": 600}, "cluster": {"num_replicas": 3, "global_scheduler": "lor"}},
    {"scheduler": {"type": "sarathi", "num_blocks": 400}, "cluster": {"num_replicas": 2, "pipeline_parallel_size": 2}},
    {"scheduler": {"type": "vllm", "num_blocks": 40}},   # most requests rejected
])
def test_sweeping_every_few_arrivals_changes_no_result(monkeypatch, case):
    """Retiring finished requests every 7 arrivals and compacting gaps constantly gives the
    same request table and summary as keeping everything to the end."""
    config = parse_config({**BASE, **case, "engine": {"record": "requests"}})
    kept = run_simulation(config)
    monkeypatch.setattr(simulator, "SWEEP_EVERY", 7)
    monkeypatch.setattr(record, "GAPS_BEFORE_COMPACTING", 50)
    monkeypatch.setattr(record, "RUNS_BEFORE_COMPACTING", 3)
    swept = run_simulation(config)
    pd.testing.assert_frame_equal(kept.requests, swept.requests, check_exact=True)
    assert kept.summary == swept.summary


def test_compacted_gaps_are_distinct_values_with_counts():
    """Gap samples fold into sorted distinct values and how often each occurred."""
    recorder = record.Recorder("requests", 1)
    recorder.on_token_gap(0.5)
    recorder.on_token_gap(0.25)
    recorder.compact_gaps(force=True)          # first fold at the end of a run: kept as they are
    assert recorder.gaps[0].tolist() == [0.5, 0.25] and recorder.gaps[1].tolist() == [1, 1]
    recorder.on_token_gap(0.5)
    recorder.on_run_gaps([], np.array([0.25, 0.75]), np.array([3, 0]))
    recorder.compact_gaps(force=True)
    assert recorder.gaps[0].tolist() == [0.25, 0.5, 0.75]
    assert recorder.gaps[1].tolist() == [4, 2, 0]
    recorder.compact_gaps(force=True)          # the folded samples were taken out: nothing counts twice
    assert recorder.gaps[1].tolist() == [4, 2, 0]


def test_a_gap_window_counts_only_the_gaps_ending_inside_it():
    """With a window [1, 2] s: a gap ending at 0.5 s (warm-up) and one at 2.5 s (drain) are left
    out, one at 1.5 s counts; of a decode run whose first gaps end at 0.9 s and whose iterations
    end at 0.95, 1.2, 2.0 and 2.1 s, only the steps ending at 1.2 and 2.0 s count (seen by 2 and 1
    members)."""
    recorder = record.Recorder("requests", 1, gap_window=(1.0, 2.0))
    for now, gap in ((0.5, 0.1), (1.5, 0.2), (2.5, 0.3)):
        recorder.now = now
        recorder.on_token_gap(gap)
    recorder.on_run_gaps([0.4, 0.4], np.array([0.05, 0.25, 0.8, 0.1]), np.array([3, 2, 1, 1]),
                         first_at=0.9, step_ends=np.array([0.95, 1.2, 2.0, 2.1]))
    recorder.compact_gaps(force=True)
    assert recorder.gaps[0].tolist() == [0.2, 0.25, 0.8]
    assert recorder.gaps[1].tolist() == [1, 2, 1]


def test_a_windowed_run_fast_forwarded_counts_the_same_gaps_as_step_by_step():
    """The window filters the gaps of fast-forwarded decode runs by their iterations' end times,
    exactly as step-by-step simulation filters each gap as it happens."""
    config = parse_config({**BASE, "scheduler": {"type": "vllm", "num_blocks": 600},
                           "engine": {"record": "requests"}})
    window = (2.0, 6.0)
    fast = run_simulation(config, gap_window=window)
    slow = run_simulation(config.model_copy(update={"engine": config.engine.model_copy(
        update={"fast_forward": False})}), gap_window=window)
    whole = run_simulation(config)
    tbt = [f"tbt_p{p}_s" for p in (50, 90, 99)]
    assert [fast.summary[k] for k in tbt] == [slow.summary[k] for k in tbt]
    assert [fast.summary[k] for k in tbt] != [whole.summary[k] for k in tbt]
