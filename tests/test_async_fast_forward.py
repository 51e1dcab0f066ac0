"""vllm_v1's fast-forward with async scheduling, on narrated cases (docs/design/fast-forward.md).

Every case runs one replica with the `linear` cost model at 0.125 s per iteration (no per-token
cost, no host time to hide), so iteration ends are exact binary fractions. With async steps the
first formation of a request's prompt is followed at once by a second step (its first output a
placeholder); from then on, step j+2 is formed as step j ends, while step j+1 runs. A run starts
when the step formed (F1) is a decode step of everyone running and the step running (F0) one of
each of them plus those whose last token it is (a placeholder counts, once its prompt landed).
Each case also checks that stepwise simulation gives the same tables (run_agreement).
"""

import numpy as np
from run_agreement import assert_runs_agree, run

from sim_core.engine.fast_forward import FastForward
from sim_core.workload import Workload

ITERATION = 0.125


def scenario(num_blocks=64, block_size=4, caching=False):
    return {"model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 256, "seed": 0,
            "predictor": {"type": "linear", "base_s": ITERATION, "per_token_s": 0.0},
            "cluster": {"num_replicas": 1},
            "scheduler": {"type": "vllm_v1", "block_size": block_size, "num_blocks": num_blocks,
                          "enable_prefix_caching": caching, "api_server_s": 0.0}}


def workload(arrivals, prompts, outputs):
    return Workload(np.array(arrivals, dtype=float), np.array(prompts), np.array(outputs), "test")


def runs_made(monkeypatch):
    """(start, iterations) of every run that ended, in order (a spy on FastForward.on_run_end)."""
    made = []
    original = FastForward.on_run_end

    def spy(self, replica, token):
        current = self.runs.get(replica)
        if current is not None and current.token == token:
            made.append((current.started_at, current.num_iterations))
        original(self, replica, token)

    monkeypatch.setattr(FastForward, "on_run_end", spy)
    return made


def times(result, request):
    row = result.requests.loc[request]
    return row["scheduled_at"], row["prefill_completed_at"], row["completed_at"]


def test_an_arrival_while_the_queued_step_runs_is_seen_when_that_step_ends(monkeypatch):
    """Request 0 (4 prompt tokens, 10 outputs) alone: step 0 (prompt) and step 1 (placeholder)
    are formed at 0; as step 0 ends (0.125) step 2 is formed: a run starts there, F0 = step 1
    (0.125-0.25), F1 = step 2, request 0 holding 5 tokens, so 9 iterations left (iteration j
    ends at 0.25 + j x 0.125). Request 1 (4 + 2) arrives at 0.4, while step 3 runs: stepwise,
    the host next schedules as step 3 ends (0.5), forming step 5 behind step 4 (formed by the
    run at 0.375). So the run is cut after 3 iterations and ends at 0.5; step 5 starts at 0.625
    (request 1 scheduled), ends at 0.75 (first token); its placeholder step 6 (formed at 0.625)
    ends at 0.875, its last token. Request 0's 9 iterations end at 0.25 + 8 x 0.125 = 1.25."""
    made = runs_made(monkeypatch)
    config, load = scenario(), workload([0.0, 0.4], [4, 4], [10, 2])
    result = run(config, load)
    assert made[0] == (0.125, 3)
    assert times(result, 0) == (0.0, 0.125, 1.25)
    assert times(result, 1) == (0.625, 0.75, 0.875)
    events = result.block_events
    # blocks of 4 tokens, fresh ids in order: request 0 takes one at each formation of step 0
    # (4 tokens), step 1 (5) and step 5 (9: formed as it holds 8); request 1 its prompt's at step
    # 5, a second for its placeholder at step 6 (formed at 0.625)
    taken = events[events["delta"] == 1][["time", "request", "block"]].head(5).values.tolist()
    assert taken == [[0.0, 0, 0], [0.0, 0, 1], [0.5, 0, 2], [0.5, 1, 3], [0.625, 1, 4]]
    assert_runs_agree(config, load)


def test_an_arrival_before_the_running_step_ends_drops_the_run(monkeypatch):
    """As above, but request 1 arrives at 0.2, while F0 (step 1, 0.125-0.25) runs: the formation
    that sees it is at 0.25, where stepwise simulation forms step 3 with request 1's prompt, so
    the run gives way before it begins (none started at 0.125 ends). Step 3 runs 0.375-0.5,
    request 1's placeholder step 4 (formed at 0.375) 0.5-0.625."""
    made = runs_made(monkeypatch)
    config, load = scenario(), workload([0.0, 0.2], [4, 4], [10, 2])
    result = run(config, load)
    assert all(start != 0.125 for start, _ in made)
    assert times(result, 1) == (0.375, 0.5, 0.625)
    assert times(result, 0)[2] == 1.25
    assert_runs_agree(config, load)


def test_a_completion_in_the_last_iteration_of_a_run_is_handled_stepwise(monkeypatch):
    """Requests 0 (4 + 6) and 1 (4 + 12) start together; the run starts at 0.125 holding 5 tokens
    each: request 0 has 5 iterations left (ending 0.25 ... 0.75), request 1 has 11. Nothing
    waits, so the run may go past completions; request 2 (4 + 2) arriving at 0.7 cuts it at the
    iteration ending at 0.75, request 0's last: its completion is the run's end. Request 2 is in
    the formation at 0.75 (step 7, behind step 6, which the run formed at 0.625 with request 1
    only), runs 0.875-1.0, then its placeholder step until 1.125. Request 1 ends at 0.25 + 10 x
    0.125."""
    made = runs_made(monkeypatch)
    config, load = scenario(), workload([0.0, 0.0, 0.7], [4, 4, 4], [6, 12, 2])
    result = run(config, load)
    assert made[0] == (0.125, 5)
    assert times(result, 0)[2] == 0.75
    assert times(result, 2) == (0.875, 1.0, 1.125)
    assert times(result, 1)[2] == 1.5
    batches = result.batches.set_index("batch_id")
    assert batches.loc[6, "request_ids"] == (1,) and batches.loc[6, "formed_at"] == 0.625
    assert_runs_agree(config, load)


def test_a_preemption_right_after_a_run_finds_the_steps_the_run_left_in_flight(monkeypatch):
    """Requests 0 and 1 (4 + 12 each, blocks of 4) on 5 blocks: at 0 each takes a block for its
    prompt and one for its placeholder (4 used). The run from 0.125 holds 5 tokens each; the
    formation at 0.5 (of step 5, counting 8 tokens) needs a third block each, 2 > the 1 free,
    so the run ends there (3 iterations). Stepwise at 0.5 request 0 takes block 4; request 1,
    the tail, must preempt itself: it restarts at 0.5 and frees its blocks 1 and 3, while its
    token from step 4 (formed by the run at 0.375, in flight) still arrives, stale, at 0.625."""
    made = runs_made(monkeypatch)
    config, load = scenario(num_blocks=5), workload([0.0, 0.0], [4, 4], [12, 12])
    result = run(config, load)
    assert made[0] == (0.125, 3)
    states = result.state_events
    restarts = states[states["state"] == "restarted"]
    assert restarts[["time", "request"]].values.tolist()[0] == [0.5, 1]
    events = result.block_events
    at_half = events[events["time"] == 0.5][["request", "block", "delta"]].values.tolist()
    assert [0, 4, 1] in at_half and sorted(b for r, b, d in at_half if r == 1 and d == -1) == [1, 3]
    assert_runs_agree(config, load)


def test_prefix_cache_keys_of_a_run_carry_their_stepwise_times(monkeypatch):
    """Request 0 alone (4 + 10, 14 tokens, blocks of 4, prefix caching, full record). Stepwise:
    at 0 step 0 takes block 0 and keys it (its 4 prompt tokens fill it), step 1 takes block 1.
    Each later formation counts the tokens its request holds then: step 5, formed at 0.5 holding
    8, takes block 2 then keys block 1; step 9, formed at 1.0 holding 12, takes block 3 then keys
    block 2. Its last token (step 9) ends at 1.25: block 3 (tokens 12-13) never fills. The run
    from 0.125 (9 iterations left, nothing waiting: limit 8) makes those two formations, so its
    replay gives them their times, not the run's end (1.125)."""
    made = runs_made(monkeypatch)
    config, load = scenario(caching=True), workload([0.0], [4], [10])
    result = run(config, load)
    assert made == [(0.125, 8)]
    events = result.block_events[["time", "request", "block", "delta"]].values.tolist()
    assert events == [[0.0, 0, 0, 1], [0.0, -1, 0, 2], [0.0, 0, 1, 1],
                      [0.5, 0, 2, 1], [0.5, -1, 1, 2],
                      [1.0, 0, 3, 1], [1.0, -1, 2, 2],
                      [1.25, 0, 0, -1], [1.25, 0, 1, -1], [1.25, 0, 2, -1], [1.25, 0, 3, -1]]
    assert_runs_agree(config, load)


def test_host_time_hidden_over_several_replicas_adds_up_in_stepwise_order():
    """Three replicas with host time (roofline) hide part of it behind the GPU: the total hidden
    (operators.csv) is a float sum over every replica's iterations in the order they start, so
    runs, which price their iterations ahead, hand theirs in only once every iteration started
    before them is counted: the operator table equals the stepwise one to the last bit."""
    rng = np.random.default_rng(5)
    load = Workload(np.sort(rng.uniform(0, 5, 60)), rng.integers(16, 300, 60), rng.integers(16, 200, 60), "test")
    config = {"model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 1024, "predictor": {"type": "roofline"},
              "cluster": {"num_replicas": 3, "global_scheduler": "round_robin"}, "scheduler": {"type": "vllm_v1"}}
    stepwise, fast = run(config, load, fast_forward=False, record="batches"), run(config, load, record="batches")
    hidden = stepwise.operator_times.set_index("operator").loc["cpu_hidden_by_overlap", "seconds"]
    assert hidden < 0
    assert stepwise.operator_times.equals(fast.operator_times)
