"""sglang under fast-forward: a decode run is priced at the padded size of its live members,
evicts cached prefixes at the instants stepwise would, leaves new_token_ratio where stepwise
decays leave it and stops before a retraction could be needed; every table equals the stepwise
run's. Costs are linear: 10 ms + 1 ms per token (conftest)."""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import cost, scenario, workload
from run_agreement import TABLES

from sim_core import parse_config, run_simulation
from sim_core.engine.fast_forward import FastForward
from sim_core.schedulers.sglang_retract import MIN_NEW_TOKEN_RATIO
from sim_core.workload import Workload

NO_GRAPHS = {"cuda_graph_batch_sizes": []}
DECAY = (0.7 - 0.7 * 0.14) / 600   # SGLang: from 0.7 down to 0.098 over 600 decode batches


def both(rows, watch=lambda simulator: None, **overrides):
    """The stepwise and the fast-forwarded run (full records) of a hand-made workload, each with
    the kernel time and `watch(simulator)` after every event."""
    runs = {}
    for fast in (False, True):
        seen: list = []

        def note(simulator, seen=seen):
            seen.append((simulator.kernel.now, watch(simulator)))
        config = parse_config(scenario("sglang", engine={"fast_forward": fast}, **overrides))
        runs[fast] = (run_simulation(config, workload(*rows), after_event=note), seen)
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(runs[False][0], table), getattr(runs[True][0], table))
    return runs


def test_a_run_is_priced_at_the_padded_size_which_shrinks_when_a_member_finishes():
    """Graphs for 1, 2, 4, 8. Three 16-token prompts prefill together (48 tokens, unpadded);
    then the three decode as one run, padded to 4 (10 + 4 ms); request 0 has its 3 outputs after
    two decodes, and the other two go on in the same run padded to 2 (10 + 2 ms) for two more.
    The fast-forwarded run records what stepwise does and takes far fewer events."""
    runs = both([(0.0, 16, 3), (0.0, 16, 5), (0.0, 16, 5)], scheduler={"cuda_graph_batch_sizes": [1, 2, 4, 8]})
    result, seen = runs[True]
    assert result.batches["num_requests"].tolist() == [3, 3, 3, 2, 2]
    assert result.batches["padded_size"].tolist() == [3, 4, 4, 2, 2]
    assert result.batches["num_decodes"].tolist() == [0, 1, 1, 0, 0]   # linear cost: only the padding counts
    durations = [cost(48), cost(4), cost(4), cost(2), cost(2)]
    stages = result.batch_stages
    assert (stages["end"] - stages["start"]).tolist() == pytest.approx(durations, abs=1e-12)
    assert len(seen) < len(runs[False][1]) - 8   # eight decode events (batch end, formation) at least skipped


def test_a_cached_prefix_is_evicted_inside_a_run_at_the_formation_that_needs_its_blocks():
    """Blocks of 4, 8 in all. Request 0 (16-token prompt, one output) finishes with its prefill
    and leaves its 4 blocks in the radix tree (evictable). Request 1 (4 + 20 tokens) arrives at
    0.1 s, prefills (14 ms), then decodes alone in one run from 0.114 s; its next token outgrows
    its blocks every 4 decodes: at formations 0, 4 and 8 it takes the 3 free blocks (5, 6, 7), at
    formation 12 (0.114 + 12 x 11 ms) the free list is empty and the tree's leaf (blocks 0-3)
    goes: four -2 events at that instant, as stepwise, although no event ran then."""
    runs = both([(0.0, 16, 1), (0.1, 4, 20)], scheduler={"num_blocks": 8, "block_size": 4, **NO_GRAPHS})
    result, seen = runs[True]
    events = result.block_events
    evicted = events[events["delta"] == -2]
    formation_12 = 0.1 + cost(4) + 12 * cost(1)
    assert evicted["time"].tolist() == pytest.approx([formation_12] * 4, abs=1e-9)
    assert evicted["block"].tolist() == [0, 1, 2, 3]
    assert not any(abs(time - formation_12) < 1e-9 for time, _ in seen)


def test_new_token_ratio_after_a_run_is_where_its_decays_leave_it():
    """One request, 10 outputs: its 9 decode batches each decay new_token_ratio once, 0.7 - 9 x
    (0.602 / 600), sequentially as stepwise; the run applies them at its end, so the lowest value
    seen (before the idle reset to 0.7) is the same in both runs. 700 decodes pass the floor:
    the ratio stops at 0.098."""
    def ratio(simulator):
        return simulator.schedulers[0].new_token_ratio
    runs = both([(0.0, 4, 10)], watch=ratio, scheduler=NO_GRAPHS)
    expected = 0.7
    for _ in range(9):
        expected -= DECAY
    for fast in (False, True):
        assert min(value for _, value in runs[fast][1]) == expected
    assert len(runs[True][1]) < len(runs[False][1])
    floor = both([(0.0, 4, 701)], watch=ratio, scheduler=NO_GRAPHS)
    for fast in (False, True):
        assert min(value for _, value in floor[fast][1]) == MIN_NEW_TOKEN_RATIO == 0.7 * 0.14


def test_a_run_stops_before_the_formation_that_would_retract():
    """As test_sglang's retraction case (104 one-token blocks): requests 0 and 1 decode together
    and the pool is short 49 decodes later, when request 1 is retracted. The fast-forwarded run
    keeps a block spare at every formation, so it ends before that formation, which runs
    stepwise and retracts exactly as without fast-forward; the joint decodes take a handful of
    events instead of ~50 batch ends and formations."""
    runs = both([(0.0, 2, 61), (0.001, 3, 55)], scheduler={"num_blocks": 104, "block_size": 1, **NO_GRAPHS})
    result, seen = runs[True]
    assert result.requests["num_restarts"].tolist() == [0, 1]
    joint = cost(2) + cost(3)
    shortage = joint + 49 * cost(2)
    inside = [time for time, _ in seen if joint + 1e-9 < time < shortage - 1e-9]
    assert len(inside) <= 4
    assert len([time for time, _ in runs[False][1] if joint + 1e-9 < time < shortage - 1e-9]) > 40


def test_host_time_hidden_by_overlap_over_several_replicas_equals_stepwise_to_the_bit(monkeypatch):
    """Three sglang replicas with overlap scheduling and host time (roofline): a run prices its
    iterations as stepwise would, its first hiding host time behind the replica's last iteration
    when back to back, and hands what they hid to the clock in the order of their starts among
    every replica's iterations (the first at once, as iteration_time would). So the
    `cpu_hidden_by_overlap` row, a float sum over all iterations in start order, and the summary
    equal the stepwise run's to the last bit, while runs of several iterations did happen."""
    made = []
    original = FastForward.on_run_end

    def spy(self, replica, token):
        current = self.runs.get(replica)
        if current is not None and current.token == token:
            made.append(current.num_iterations)
        original(self, replica, token)

    monkeypatch.setattr(FastForward, "on_run_end", spy)
    rng = np.random.default_rng(5)
    load = Workload(np.sort(rng.uniform(0, 5, 60)), rng.integers(16, 300, 60), rng.integers(16, 200, 60), "test")
    config = {"model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 1024, "predictor": {"type": "roofline"},
              "cluster": {"num_replicas": 3, "global_scheduler": "round_robin"},
              "scheduler": {"type": "sglang", "enable_overlap_schedule": True}}
    stepwise, fast = (run_simulation(parse_config({**config, "engine": {"fast_forward": fast, "record": "batches"}}),
                                     load) for fast in (False, True))
    assert max(made) > 2
    hidden = stepwise.operator_times.set_index("operator").loc["cpu_hidden_by_overlap", "seconds"]
    assert hidden < 0
    assert stepwise.operator_times.equals(fast.operator_times)
    assert json.dumps(stepwise.summary, sort_keys=True) == json.dumps(fast.summary, sort_keys=True)
