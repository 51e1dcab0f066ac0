"""The Chrome trace: complete events per batch stage, named tracks, counters, microseconds."""

import json

from conftest import cost, simulate

from sim_core.export import chrome_trace
from sim_core.export.request_tracks import REQUESTS_PID


def test_stages_are_complete_events_on_replica_and_stage_tracks():
    result = simulate([(0.0, 10, 2)] * 4, cluster={"pipeline_parallel_size": 2, "num_replicas": 2},
                      scheduler={"batch_size_cap": 4})
    trace = json.loads(json.dumps(chrome_trace(result)))
    events = trace["traceEvents"]
    names = {(e["pid"], e["tid"], e["args"]["name"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"
             and e["pid"] != REQUESTS_PID}                  # request tracks: tests/test_request_tracks.py
    assert names == {(0, 0, "Stage 0"), (0, 1, "Stage 1"), (1, 0, "Stage 0"), (1, 1, "Stage 1")}
    spans = [e for e in events if e["ph"] == "X" and e["cat"] == "batch"]
    assert len(spans) == len(result.batch_stages)
    first = next(e for e in spans if e["pid"] == 0 and e["tid"] == 0 and e["ts"] == 0)
    assert first["dur"] == cost(20) * 1e6
    assert first["args"]["request_ids"] == [0, 2] and first["args"]["request_tokens"] == [10, 10]
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert counters == {"KV blocks", "Requests"}


def test_percentiles_use_the_inverted_cdf_with_weights():
    """p50 of [1, 2, 3, 4] is 2 (half the samples at or below it); weights count as repeats."""
    import numpy as np

    from sim_core.results.metrics import quantiles

    assert quantiles(np.array([4.0, 1.0, 3.0, 2.0]), [50, 75, 99]) == [2.0, 3.0, 4.0]
    assert quantiles(np.array([1.0, 5.0]), [50, 90], np.array([9, 1])) == [1.0, 1.0]
    assert quantiles(np.array([1.0, 5.0]), [95], np.array([9, 1])) == [5.0]
    assert np.isnan(quantiles(np.array([]), [50])[0])
