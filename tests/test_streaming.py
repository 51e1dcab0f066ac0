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
