"""Closed-loop (agentic) sessions: a turn arrives a pause after the previous turn completes.

Costs are the linear 10 ms + 1 ms per token of conftest: a 10-token prompt takes 0.02 s, a
decode step of one request 0.011 s.
"""

import numpy as np
import pandas as pd
import pytest
from conftest import cost, scenario

from sim_core import parse_config, run_simulation
from sim_core.workload import Workload, build_workload

CLOSED = {"sessions": {"closed_loop": True}}


def session_workload(*rows) -> Workload:
    """rows: (workload time, prompt, output, session, turn) in workload (arrival) order."""
    arrived, prompt, output, session, turn = zip(*rows)
    return Workload(np.array(arrived, dtype=float), np.array(prompt, dtype=np.int64),
                    np.array(output, dtype=np.int64), "test", session_id=np.array(session, dtype=np.int64),
                    turn=np.array(turn, dtype=np.int64))


def run(requests, policy="vllm", after_event=None, **overrides):
    overrides.setdefault("workload", CLOSED)
    return run_simulation(parse_config(scenario(policy, **overrides)), requests, after_event=after_event)


def formations(result) -> list[tuple]:
    return [(round(t, 9), tuple(ids)) for t, ids in zip(result.batches["formed_at"], result.batches["request_ids"])]


def test_the_next_turn_arrives_its_gap_after_the_previous_turn_completes():
    """Turn 0 (10-token prompt, 3 tokens) runs 0 -> 0.042 s. The workload places turn 1 five
    seconds after turn 0's arrival: closed loop, it arrives 5 s after turn 0 *completes*."""
    workload = session_workload((0.0, 10, 3, 0, 0), (5.0, 20, 2, 0, 1))
    result = run(workload)
    done = cost(10) + 2 * cost(1)
    assert result.requests["completed_at"][0] == done
    assert result.requests["arrived_at"].tolist() == [0.0, done + 5.0]
    assert formations(result) == [(0.0, (0,)), (round(cost(10), 9), (0,)), (round(cost(10) + cost(1), 9), (0,)),
                                  (round(done + 5.0, 9), (1,)), (round(done + 5.0 + cost(20), 9), (1,))]
    open_loop = run(workload, workload={"sessions": {"closed_loop": False}})
    assert open_loop.requests["arrived_at"].tolist() == [0.0, 5.0]


def test_the_run_ends_only_when_every_session_is_done_and_skips_idle_gaps():
    """The only pre-created arrival is at t=0; the run goes on until the last turn completes.
    Nothing happens in the pauses: the number of events is the same for a 5 s and a 5000 s pause."""
    events = {}
    for pause in (5.0, 5000.0):
        counter = []
        workload = session_workload((0.0, 10, 3, 0, 0), (pause, 10, 3, 0, 1), (2 * pause, 10, 3, 0, 2))
        result = run(workload, after_event=lambda sim, seen=counter: seen.append(sim.kernel.now))
        turn = cost(10) + 2 * cost(1)
        assert result.summary["makespan_s"] == pytest.approx(3 * turn + 2 * pause, abs=1e-9)
        assert result.summary["num_batches"] == 9 and result.summary["num_finished"] == 3
        events[pause] = len(counter)
        done = result.requests["completed_at"][0]
        assert not [t for t in counter if done < t < done + pause]   # straight from turn 0's end to turn 1
    assert events[5.0] == events[5000.0]


def test_a_zero_pause_turn_arrives_at_its_predecessors_completion():
    """Both turns at t=0 in the workload: the gap is 0, so turn 1 arrives when turn 0 completes
    (at the end of that instant) and the idle replica starts its prompt at once."""
    result = run(session_workload((0.0, 10, 3, 0, 0), (0.0, 10, 1, 0, 1)))
    done = cost(10) + 2 * cost(1)
    assert result.requests["arrived_at"].tolist() == [0.0, done]
    assert formations(result)[-1] == (round(done, 9), (1,))


def test_turns_released_for_the_same_instant_arrive_in_request_order():
    """Two one-turn-ahead sessions on two round-robin replicas finish their first turns at the
    same time with the same 1 s pause. Their next turns arrive together, request 2 (session 1)
    first, so round robin sends it to replica 0 and request 3 (session 0) to replica 1."""
    workload = session_workload((0.0, 10, 2, 0, 0), (0.0, 10, 2, 1, 0), (1.0, 10, 2, 1, 1), (1.0, 10, 2, 0, 1))
    result = run(workload, cluster={"num_replicas": 2})
    assert result.requests["replica_id"].tolist() == [0, 1, 0, 1]
    done = cost(10) + cost(1)
    assert result.requests["arrived_at"].tolist() == [0.0, 0.0, done + 1.0, done + 1.0]


def test_think_time_pauses_are_drawn_from_the_scenario_seed():
    """closed_loop_gap think_time: pauses are exponential draws (mean think_time_s) from a
    generator seeded by the scenario, one per request, whatever the workload's gaps."""
    workload = session_workload((0.0, 10, 3, 0, 0), (50.0, 10, 3, 0, 1))
    result = run(workload, seed=7, workload={"sessions": {"closed_loop": True, "closed_loop_gap": "think_time",
                                                          "think_time_s": 2.0}})
    draws = np.random.default_rng(np.random.SeedSequence([7, 1])).exponential(2.0, 2)
    assert result.requests["arrived_at"][1] == result.requests["completed_at"][0] + draws[1]


def test_a_turn_that_can_never_be_served_is_skipped():
    """Turn 1's prompt needs 107 blocks of a 100-block cache: rejected up front. Turn 2 follows
    turn 0, its workload gap to turn 0 (3 s) after turn 0 completes."""
    workload = session_workload((0.0, 10, 3, 0, 0), (1.0, 1700, 3, 0, 1), (3.0, 10, 3, 0, 2))
    result = run(workload)
    assert result.requests["status"].tolist() == ["finished", "rejected", "finished"]
    assert result.requests["arrived_at"][2] == result.requests["completed_at"][0] + 3.0


def test_a_turn_whose_predecessor_never_finishes_never_arrives_and_says_why():
    """Request 1 gets stuck (restarted, its longer prompt no longer fits above sarathi's
    watermark, as in test_sarathi); the next turn of its session is reported, not hung."""
    workload = session_workload((0.01, 5, 32, 0, 0), (0.03, 23, 34, 1, 0), (0.5, 10, 3, 1, 1))
    result = run(workload, "sarathi", scheduler={"block_size": 2, "num_blocks": 30,
                                                 "watermark_blocks_fraction": 0.4, "chunk_size": 13})
    assert result.requests["status"].tolist() == ["finished", "rejected", "rejected"]
    assert result.requests["reject_reason"][2] == "never arrived: the previous turn of its session never finished"


def test_closed_loop_without_sessions_is_open_loop_with_a_note():
    workload = Workload(np.array([0.0, 0.001]), np.array([10, 10]), np.array([3, 3]), "test")
    result = run(workload)
    assert result.requests["arrived_at"].tolist() == [0.0, 0.001]
    assert any("no session_id column" in note for note in result.notes)


def test_generated_closed_loop_sessions_space_turns_by_think_time_only():
    """The generator leaves the answer estimate out in closed loop: each turn's workload gap is
    the open-loop gap minus the previous answer's tokens x response_s_per_token."""
    spec = {"seed": 3, "max_model_len": 100_000, "workload": {
        "num_requests": 60, "prompt_tokens": {"distribution": "fixed", "value": 20},
        "output_tokens": {"distribution": "uniform", "min": 5, "max": 30},
        "sessions": {"enabled": True, "min_turns": 3, "max_turns": 3, "think_time_s": 2.0,
                     "response_s_per_token": 0.5}}}
    open_loop = build_workload(parse_config(spec))
    spec["workload"]["sessions"]["closed_loop"] = True
    closed = build_workload(parse_config(spec))
    for session in range(5):
        opened, shut = (np.flatnonzero(w.session_id == session) for w in (open_loop, closed))
        estimate = 0.5 * open_loop.num_decode_tokens[opened[:-1]]
        assert np.diff(closed.arrived_at[shut]) == pytest.approx(np.diff(open_loop.arrived_at[opened]) - estimate)


def test_a_generated_agentic_run_never_overlaps_the_turns_of_a_session():
    config = parse_config({"seed": 1, "predictor": {"type": "linear"}, "max_model_len": 8192, "workload": {
        "num_requests": 60, "prompt_tokens": {"min": 16, "max": 256}, "output_tokens": {"min": 16, "max": 128},
        "sessions": {"enabled": True, "closed_loop": True, "min_turns": 2, "max_turns": 4, "think_time_s": 1.0}}})
    workload = build_workload(config)
    result = run_simulation(config, workload)
    requests = result.requests.assign(session=workload.session_id, turn=workload.turn)
    assert (requests["status"] == "finished").all()
    for _, turns in requests.groupby("session"):
        turns = turns.sort_values("turn")
        assert (turns["arrived_at"].to_numpy()[1:] > turns["completed_at"].to_numpy()[:-1]).all()


def test_a_turn_arriving_where_a_run_finishes_a_request_is_recorded_after_that_finish():
    """Two replicas (round robin), each step 0.25 s whatever its size; four 4-token prompts at
    0: A1 (request 0, 10 tokens) and A2 (2, 30 tokens) on replica 0, C (1, 10 tokens) and E
    (3, 30 tokens) on replica 1. Both replicas run the same steps: the prefill to 0.25 s, the
    tenth token of A1 and C at 0.25 + 9 x 0.25 = 2.5 s. C's next turn D (request 4, pause 0)
    arrives at the end of that instant and is routed to replica 0 (the fifth routing), where A1
    finished at 2.5 s in the instant's ordinary phase: replica 0's states at 2.5 s are A1
    finished, then D queued. Fast-forward finishes A1 inside a decode run whose records are made
    after D was routed; the state table is still stepwise's, row for row."""
    workload = session_workload((0.0, 4, 10, 0, 0), (0.0, 4, 10, 1, 0), (0.0, 4, 30, 2, 0), (0.0, 4, 30, 3, 0),
                                (0.0, 4, 3, 1, 1))
    config = {"seed": 0, "model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 256,
              "predictor": {"type": "linear", "base_s": 0.25, "per_token_s": 0.0},
              "cluster": {"num_replicas": 2, "global_scheduler": "round_robin"},
              "scheduler": {"type": "vllm", "block_size": 16, "num_blocks": 64, "batch_size_cap": 4},
              "workload": CLOSED}
    states = []
    for fast in (False, True):
        result = run_simulation(parse_config({**config, "engine": {"fast_forward": fast, "record": "full"}}), workload)
        events = result.state_events
        at = events[(events["time"] == 2.5) & (events["replica"] == 0)]
        assert [(int(r), str(s)) for r, s in zip(at["request"], at["state"])] == [(0, "finished"), (4, "queued")]
        states.append(events)
    pd.testing.assert_frame_equal(states[0], states[1])
