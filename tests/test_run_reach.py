"""How far a decode run plans when it starts (`engine/run_reach.py`): about as far as the next
arrival, which changes what is priced up front and never a result."""

import numpy as np
import pandas as pd
from run_agreement import TABLES, assert_runs_agree, run

from sim_core.engine.fast_forward import FastForward
from sim_core.engine.run_reach import RunReach, reach_iterations
from sim_core.workload import Workload


def test_reach_is_the_iterations_that_fit_an_eighth_more_and_two():
    """0.5 s at 0.0625 s an iteration: 8 fit, planned 8 + 1 + 2 = 11; 2 s: 32 + 4 + 2 = 38;
    an arrival closer than one iteration still plans MIN_REACH (4)."""
    assert reach_iterations(0.5, 0.0625) == 11
    assert reach_iterations(2.0, 0.0625) == 38
    assert reach_iterations(0.01, 0.0625) == 4


def test_the_cap_reads_the_next_arrival_per_replica_share_and_the_last_run():
    """Arrivals at 1, 2 and 3 s. Before replica 0 ends a run its iteration time is unknown:
    the chunk stays. Its run of 8 iterations from 0 to 0.5 s makes it 0.0625 s. At 1.0 (the
    arrival at 1.0 has come) the next is at 2.0: 1 s, 16 fit, 16 + 2 + 2 = 20 < 32. With two
    replicas the second next arrival (3.0) counts: 2 s, 38, so a chunk of 32 stays; at 1.5 it
    is 1.5 s away: 24 + 3 + 2 = 29. Past the last arrival nothing caps."""
    one = RunReach([1.0, 2.0, 3.0], num_replicas=1)
    assert one.cap(0, 1.0, 32) == 32
    one.note_run(0, 0.0, 0.5, 8)
    assert one.cap(0, 1.0, 32) == 20
    assert one.cap(0, 1.0, 16) == 16
    assert one.cap(1, 1.0, 32) == 32   # replica 1 has not run
    assert one.cap(0, 3.0, 32) == 32
    two = RunReach([1.0, 2.0, 3.0], num_replicas=2)
    two.note_run(0, 0.0, 0.5, 8)
    assert two.cap(0, 1.0, 32) == 32
    assert two.cap(0, 1.5, 40) == 29


SCENARIO = {"model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 256, "seed": 0,
            "predictor": {"type": "linear", "base_s": 0.125, "per_token_s": 0.0},
            "cluster": {"num_replicas": 1},
            "scheduler": {"type": "vllm_v1", "block_size": 4, "num_blocks": 64, "enable_prefix_caching": True,
                          "api_server_s": 0.0}}


def planned(monkeypatch):
    """(time, iterations planned before, planned after) of every `FastForward._plan` call."""
    calls = []
    original = FastForward._plan

    def spy(self, replica, decode_run, stop):
        calls.append((self.sim.kernel.now, len(decode_run.ends), stop))
        original(self, replica, decode_run, stop)

    monkeypatch.setattr(FastForward, "_plan", spy)
    return calls


def test_a_run_plans_to_about_the_next_arrival_and_results_do_not_change(monkeypatch):
    """vllm_v1 (async steps, prefix caching), 0.125 s an iteration. Request 0 (4 + 60 tokens)
    runs alone from 0.125: no run ended yet, so it plans FIRST_CHUNK (16), is extended at 2.125
    (3 x 16 = 48) and is cut by request 1's arrival at 3.0 after 23 iterations of 0.125 s. The
    run after request 1's prompt starts at 3.25; request 2 arrives at 4.0, 0.75 s away: 6
    iterations fit, so it plans 6 + 0 + 2 = 8 where it planned 33 before (max(16, 2 x 23) = 46,
    cut to the run's limit: request 0 has 34 iterations left, its last token in flight), and
    runs 6. The last run (from 4.25) has no arrival ahead: max(16, 2 x 6) = 16, extended at
    6.25 to request 0's end (25). Every table equals the uncapped and the stepwise runs'."""
    calls = planned(monkeypatch)
    load = Workload(np.array([0.0, 3.0, 4.0]), np.array([4, 4, 4]), np.array([60, 8, 8]), "test")
    capped = run(SCENARIO, load)
    assert calls == [(0.125, 1, 16), (2.125, 16, 48), (3.25, 1, 8), (4.25, 1, 16), (6.25, 16, 25)]
    calls.clear()
    monkeypatch.setattr(RunReach, "cap", lambda self, replica, now, chunk: chunk)
    uncapped = run(SCENARIO, load)
    assert calls == [(0.125, 1, 16), (2.125, 16, 48), (3.25, 1, 33), (4.25, 1, 16), (6.25, 16, 25)]
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(capped, table), getattr(uncapped, table))
    monkeypatch.undo()
    assert_runs_agree(SCENARIO, load)
