"""A decode run's last iteration ends in bulk (engine/fast_forward.py, `_end_in_bulk`): for
vllm, sarathi and orca (`SteadyDecode.ends_in_bulk`) no batch is formed for it; its members'
tokens are applied with the skipped iterations, its stage row is recorded as it ends, and its
batch end (the token gap of each member, completions, the policy's bookkeeping, the replica's
state) runs where the stepwise batch end would. Every table must equal the stepwise run's.

vllm, linear cost 10 ms + 1 ms per token (conftest): a 16-token prefill takes 26 ms, a decode
iteration of n requests 10 + n ms. Request 0 (16 + 6 tokens) is prefilled in 0..0.026 s (its
first token, token 17, at 0.026); its decode run starts at 0.026 with 22 - 17 = 5 iterations
left, iteration j ending at 0.026 + (j + 1) x 0.011. Request 1 (16 + 2) arrives at
0.026 + 1.5 x 0.011 = 0.0425 s, inside iteration 1, so the run is cut there: 2 iterations,
the last ending at 0.048 (request 0 then holds 19 tokens). Request 1's prefill runs 0.048 to
0.074 (first token at 0.074). The next decode run holds both (sorted by arrival), 12 ms an
iteration: request 1 needs 18 - 17 = 1 more token and finishes at 0.086; nothing waits, so the
run goes on with request 0 alone (11 ms): 3 iterations (19 + 3 = 22 tokens), ending at 0.097
and 0.108. That run also ends at its limit with its last iteration (0.097..0.108) in bulk."""

import pandas as pd
import pytest
from conftest import cost, scenario, workload
from run_agreement import TABLES

from sim_core import parse_config, run_simulation
from sim_core.engine.simulator import Simulator

ARRIVAL = cost(16) + 1.5 * cost(1)


def both(policy: str = "vllm"):
    """The stepwise and the fast-forwarded run (full records); for the latter, after every
    event, the kernel time and replica 0's run length (num_iterations) or None."""
    results, seen = {}, []

    def note(simulator):
        run = simulator.fast.runs.get(0) if simulator.fast is not None else None
        seen.append((simulator.kernel.now, None if run is None else run.num_iterations))
    for fast in (False, True):
        config = parse_config(scenario(policy, engine={"fast_forward": fast}))
        results[fast] = run_simulation(config, workload((0.0, 16, 6), (ARRIVAL, 16, 2)),
                                       after_event=note if fast else None)
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(results[False], table), getattr(results[True], table))
    return results[True], seen


def test_a_cut_run_ends_with_its_last_iteration_in_bulk_as_stepwise():
    """The first run is cut to 2 iterations by the arrival (seen inside the run at 0.0425);
    its last iteration (batch 2) runs 0.037..0.048 and request 0's tokens there and after are
    exactly the stepwise ones: its gaps are 0.011, 0.011, then 0.086 - 0.048 = 0.038 across
    request 1's prefill (its widest), then 0.011 twice; it finishes at 0.108. Request 1: first
    token at 0.074, its one gap 0.012, finished at 0.086."""
    result, seen = both()
    assert (pytest.approx(ARRIVAL), 2) in seen          # the arrival cut the run to 2 iterations
    stages = result.batch_stages.set_index("batch_id")
    assert stages.loc[2, ["start", "end"]].tolist() == pytest.approx([0.037, 0.048], abs=1e-12)
    assert stages.loc[3, ["start", "end"]].tolist() == pytest.approx([0.048, 0.074], abs=1e-12)   # the prefill
    assert stages.loc[6, ["start", "end"]].tolist() == pytest.approx([0.097, 0.108], abs=1e-12)
    requests = result.requests.set_index("request_id")
    assert requests.loc[0, "completed_at"] == pytest.approx(0.108, abs=1e-12)
    assert requests.loc[0, "tbt_max"] == pytest.approx(0.038, abs=1e-12)
    assert requests.loc[1, ["prefill_completed_at", "completed_at", "tbt_max"]].tolist() == pytest.approx(
        [0.074, 0.086, 0.012], abs=1e-12)
    # six gaps of 0.011 or 0.012 and one of 0.038: the median is 0.011, the 90th percentile 0.038
    assert result.summary["tbt_p50_s"] == pytest.approx(0.011, abs=1e-12)
    assert result.summary["tbt_p90_s"] == pytest.approx(0.038, abs=1e-12)


def test_sarathi_ends_runs_in_bulk_as_stepwise():
    """The same two requests under sarathi (chunks of 512: each prompt is one chunk). The first
    run is cut after 2 iterations as under vllm (request 0 holds 19 tokens at 0.048), but
    sarathi then mixes request 1's prompt with request 0's decode: 16 + 1 tokens, 27 ms, to
    0.075 (request 0's widest gap, 0.027). Then both decode (12 ms, request 1 finishes at
    0.087) and request 0 alone (11 ms): its 22nd token at 0.098. Every table equals the
    stepwise run's."""
    result, _ = both("sarathi")
    requests = result.requests.set_index("request_id")
    assert requests.loc[0, ["completed_at", "tbt_max"]].tolist() == pytest.approx([0.098, 0.027], abs=1e-12)


def test_an_arrival_inside_a_run_queues_no_formation(monkeypatch):
    """Request 1 is routed at 0.0425 while replica 0's vllm run holds its only batch slot
    (`FastForward.holds_slot`), so no formation is queued then: it would form nothing (the run's
    batch is in flight). Formations happen at 0 (request 0's prefill), 0.026 (the first run),
    0.048 (the cut run's batch end: request 1's prefill), 0.074 (the second run) and 0.108 (its
    batch end, with nothing left), and every table still equals the stepwise run's (`both`)."""
    formed_at, held = [], []
    schedule, route = Simulator.on_replica_schedule, Simulator.on_global_schedule

    def on_replica_schedule(self, replica):
        if self.fast is not None:
            formed_at.append(self.kernel.now)
        schedule(self, replica)

    def on_global_schedule(self):
        if self.fast is not None:
            held.append((self.kernel.now, self.fast.holds_slot(0)))
        route(self)
    monkeypatch.setattr(Simulator, "on_replica_schedule", on_replica_schedule)
    monkeypatch.setattr(Simulator, "on_global_schedule", on_global_schedule)
    both()
    assert held == [(0.0, False), (pytest.approx(ARRIVAL), True)]
    assert formed_at == pytest.approx([0.0, 0.026, 0.048, 0.074, 0.108], abs=1e-12)
