"""vllm_v1 (vLLM V1 engine): one token budget, running first, then waiting; prefix caching.

Costs are linear: 10 ms + 1 ms per token per iteration (conftest). Scenarios that narrate one
step after another run the serial loop (SERIAL: each step is formed when the previous one
ends); the async tests at the end show what vLLM's default, async scheduling, changes."""

import numpy as np
from conftest import batches_of, column, cost, simulate

from sim_core import parse_config, run_simulation
from sim_core.workload import Workload

NO_CACHE = {"enable_prefix_caching": False}
SERIAL = {"async_scheduling": False}


def test_three_8_token_prompts_under_a_10_token_budget_schedule_8_then_2_then_0():
    """The first prompt runs whole, the second gets the 2 tokens left (chunked mid-prompt), the
    third waits. Next step: a decode, the second's last 6 and the third's first 3 fill it again."""
    result = simulate([(0.0, 8, 2)] * 3, "vllm_v1", scheduler={"max_num_batched_tokens": 10, **SERIAL})
    assert batches_of(result)[:2] == [(0.0, [0, 1], [8, 2]), (round(cost(10), 9), [0, 1, 2], [1, 6, 3])]


def test_ten_tiny_requests_with_four_slots_admit_exactly_four():
    """Budget and memory are plentiful; max_num_seqs = 4 alone stops admission."""
    result = simulate([(0.0, 2, 2)] * 10, "vllm_v1", scheduler={"max_num_seqs": 4})
    first = batches_of(result)[0]
    assert first == (0.0, [0, 1, 2, 3], [2, 2, 2, 2])


def test_zero_slots_means_unbounded():
    result = simulate([(0.0, 2, 2)] * 10, "vllm_v1", scheduler={"max_num_seqs": 0})
    assert batches_of(result)[0][1] == list(range(10))


def test_two_100_token_prompts_with_threshold_16_schedule_16_each_per_iteration():
    result = simulate([(0.0, 100, 2)] * 2, "vllm_v1", scheduler={"long_prefill_token_threshold": 16})
    assert [tokens for _, _, tokens in batches_of(result)[:7]] == [[16, 16]] * 6 + [[4, 4]]


def test_a_lone_request_runs_its_prompt_past_the_threshold():
    """The threshold keeps a long prompt from starving others; with nobody else running or
    waiting, vLLM lifts it: the 100-token prompt runs whole."""
    result = simulate([(0.0, 100, 2)], "vllm_v1", scheduler={"long_prefill_token_threshold": 16})
    assert batches_of(result)[0] == (0.0, [0], [100])


def test_a_running_decode_gets_its_token_before_a_waiting_prefill_gets_what_is_left():
    """Request 1 (20 tokens) arrives while request 0 prefills; under a 10-token budget request 0's
    decode comes first and request 1 gets the other 9, then 9 again, then its last 2."""
    result = simulate([(0.0, 4, 5), (0.001, 20, 2)], "vllm_v1", scheduler={"max_num_batched_tokens": 10, **SERIAL})
    t1 = cost(4)
    t2 = t1 + cost(10)
    assert batches_of(result)[:3] == [(0.0, [0], [4]), (round(t1, 9), [0, 1], [1, 9]),
                                      (round(t2, 9), [0, 1], [1, 9])]


def test_a_request_that_fills_memory_blocks_the_next_one_without_error():
    """4 blocks of 4 tokens: request 0's 16-token prompt takes all of them, so request 1 waits
    (no partial admission) and runs once request 0 has finished and freed them."""
    result = simulate([(0.0, 16, 1), (0.0, 4, 1)], "vllm_v1", scheduler={"num_blocks": 4, "block_size": 4})
    assert batches_of(result) == [(0.0, [0], [16]), (round(cost(16), 9), [1], [4])]
    assert column(result, "status") == ["finished", "finished"]


def test_head_of_line_blocking_keeps_a_small_request_behind_a_big_one():
    """Request 1 needs 3 blocks, only 2 are free: request 2 (1 block) waits behind it."""
    result = simulate([(0.0, 8, 3), (0.001, 12, 1), (0.001, 4, 1)], "vllm_v1",
                      scheduler={"num_blocks": 4, "block_size": 4, **NO_CACHE, **SERIAL})
    assert batches_of(result)[1] == (round(cost(8), 9), [0], [1])


def test_a_block_shortage_preempts_the_tail_of_running():
    """4 blocks of 4 tokens; two 4-token prompts decode side by side until both fill 2 blocks.
    When request 0 needs a third block, request 1 (the tail) is preempted: its 9 tokens so far
    become its prompt and it waits at the head of the queue while request 0 decodes alone; the
    newcomer request 2 waits behind it (head-of-line)."""
    rows = [(0.0, 4, 8), (0.0, 4, 8), (0.06, 1, 1)]
    result = simulate(rows, "vllm_v1", scheduler={"num_blocks": 4, "block_size": 4, **NO_CACHE, **SERIAL})
    batches = batches_of(result)
    ends = np.cumsum([cost(8)] + [cost(2)] * 4)
    assert batches[:6] == [(0.0, [0, 1], [4, 4])] + [(round(t, 9), [0, 1], [1, 1]) for t in ends[:-1]] + \
        [(round(ends[-1], 9), [0], [1])]
    assert column(result, "num_restarts") == [0, 1, 0]
    restarted = result.state_events[result.state_events["state"] == "restarted"]
    assert [[round(t, 9), r] for t, r in zip(restarted["time"], restarted["request"])] == [[round(ends[-1], 9), 1]]
    assert batches[6] == (round(ends[-1] + cost(1), 9), [0], [1])
    assert column(result, "num_prefill_tokens") == [4, 4, 1]   # the table keeps the trace's prompt


def test_a_step_that_preempts_admits_nobody_even_when_a_newcomer_would_fit():
    """Priority policy, same pool: request 1 (priority 1) is the victim when request 0
    (priority 0) needs a block; request 2 (priority 0, 1 block) heads the queue and one block is
    free, yet it is admitted only in the next step."""
    workload = Workload(np.array([0.0, 0.0, 0.06]), np.array([4, 4, 1]), np.array([8, 8, 1]), "t",
                        priority=np.array([0, 1, 0]))
    config = parse_config({"max_model_len": 2048, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
                           "scheduler": {"type": "vllm_v1", "num_blocks": 4, "block_size": 4,
                                         "enable_prefix_caching": False, "scheduling_policy": "priority", **SERIAL},
                           "engine": {"record": "full"}})
    batches = batches_of(run_simulation(config, workload))
    shortage = round(cost(8) + 4 * cost(2), 9)
    assert batches[5:7] == [(shortage, [0], [1]), (round(shortage + cost(1), 9), [0, 2], [1, 1])]


def test_priority_policy_lets_a_late_urgent_request_overtake_the_queue():
    """One slot; request 0 runs. Requests 1 (priority 1) and 2 (priority 0, later) wait: when
    request 0 finishes, the smaller priority goes first despite arriving last."""
    workload = Workload(np.array([0.0, 0.001, 0.002]), np.array([4, 4, 4]), np.array([2, 2, 2]), "t",
                        priority=np.array([1, 1, 0]))
    config = parse_config({"max_model_len": 2048, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
                           "scheduler": {"type": "vllm_v1", "num_blocks": 100, "max_num_seqs": 1,
                                         "scheduling_policy": "priority"}, "engine": {"record": "full"}})
    result = run_simulation(config, workload)
    assert [ids for _, ids, _ in batches_of(result)] == [[0], [0], [2], [2], [1], [1]]


def test_priority_preemption_takes_the_least_urgent_running_request():
    """Two decoding requests fill the pool; the one with the larger priority value is preempted
    even though it is not the tail of running."""
    workload = Workload(np.array([0.0, 0.0]), np.array([4, 4]), np.array([8, 8]), "t", priority=np.array([5, 0]))
    config = parse_config({"max_model_len": 2048, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
                           "scheduler": {"type": "vllm_v1", "num_blocks": 4, "block_size": 4,
                                         "scheduling_policy": "priority", "enable_prefix_caching": False},
                           "engine": {"record": "full"}})
    result = run_simulation(config, workload)
    assert column(result, "num_restarts") == [1, 0]


def test_prioritize_prefill_gives_the_budget_to_prompts_first():
    """Budget 10: with prioritize_prefill the 10-token newcomer takes the whole budget and the
    running decode waits an iteration; without it the decode goes first and the prompt gets 9."""
    rows = [(0.0, 4, 5), (0.001, 10, 2)]
    first = simulate(rows, "vllm_v1", scheduler={"max_num_batched_tokens": 10, "prioritize_prefill": True, **SERIAL})
    assert batches_of(first)[1] == (round(cost(4), 9), [1], [10])
    plain = simulate(rows, "vllm_v1", scheduler={"max_num_batched_tokens": 10, **SERIAL})
    assert batches_of(plain)[1] == (round(cost(4), 9), [0, 1], [1, 9])


def _shared(prompt: int, block_size: int, decode: int = 2):
    workload = Workload(np.array([0.0, 1.0]), np.array([prompt, prompt]), np.array([decode, decode]), "t",
                        prefix_group=np.array([7, 7]), prefix_len=np.array([prompt, prompt]))
    config = parse_config({"max_model_len": 2048, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
                           "scheduler": {"type": "vllm_v1", "num_blocks": 100, "block_size": block_size},
                           "engine": {"record": "full"}})
    return run_simulation(config, workload)


def test_a_fully_cached_prompt_still_schedules_one_token():
    """Block size 1: the second request's 8-token prompt is all in the cache, yet it computes its
    last token (a request that computes nothing never samples)."""
    result = _shared(8, 1)
    assert batches_of(result)[2] == (1.0, [1], [1])
    assert column(result, "num_cached_tokens") == [0, 7]
    assert result.summary["prefix_hit_rate"] == 7 / 16


def test_cached_tokens_take_no_budget_and_only_whole_blocks_hit():
    """Blocks of 16: a 40-token shared prompt hits its 2 full blocks (32 tokens); 8 are computed,
    and the prompt still counts 40 tokens in the request table (prompt throughput)."""
    result = _shared(40, 16)
    assert batches_of(result)[2] == (1.0, [1], [8])
    assert column(result, "num_cached_tokens") == [0, 32]
    assert column(result, "num_prefill_tokens") == [40, 40]


def test_cached_blocks_are_shared_with_reference_counts_in_the_block_events():
    """Request 1 arrives while request 0 decodes: it takes request 0's two cached blocks (a second
    holder each) and one new block; the events show both requests on blocks 0 and 1."""
    workload = Workload(np.array([0.0, 0.05]), np.array([40, 40]), np.array([30, 2]), "t",
                        prefix_group=np.array([1, 1]), prefix_len=np.array([40, 40]))
    config = parse_config({"max_model_len": 2048, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
                           "scheduler": {"type": "vllm_v1", "num_blocks": 100}, "engine": {"record": "full"}})
    result = run_simulation(config, workload)
    taken = result.block_events[result.block_events["delta"] == 1]
    assert taken[taken["request"] == 1]["block"].tolist() == [0, 1, 3]
    assert taken[taken["request"] == 0]["block"].tolist()[:3] == [0, 1, 2]


# ---- vLLM 0.33's rules that the reference replay pinned (tests/test_vllm_reference.py) ------------


def _priority_run(rows, priority, num_blocks, **scheduler):
    arrived, prompt, outputs = zip(*rows)
    workload = Workload(np.array(arrived), np.array(prompt), np.array(outputs), "t", priority=np.array(priority))
    config = parse_config({"max_model_len": 2048, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
                           "scheduler": {"type": "vllm_v1", "num_blocks": num_blocks, "block_size": 4,
                                         "scheduling_policy": "priority", **NO_CACHE, **SERIAL, **scheduler},
                           "engine": {"record": "full"}})
    return run_simulation(config, workload)


def test_a_request_waits_until_blocks_for_its_whole_prompt_are_free():
    """4 blocks of 4 tokens, budget 12. Request 0 (8 tokens) takes 2 blocks; request 1's first
    chunk (4 tokens, 1 block) would fit, but its whole 12-token prompt needs 3: it waits. Request
    0's decode takes a third block; it finishes, and request 1 runs its prompt whole."""
    result = simulate([(0.0, 8, 2), (0.0, 12, 1)], "vllm_v1",
                      scheduler={"num_blocks": 4, "block_size": 4, "max_num_batched_tokens": 12, **NO_CACHE, **SERIAL})
    assert batches_of(result) == [(0.0, [0], [8]), (round(cost(8), 9), [0], [1]),
                                  (round(cost(8) + cost(1), 9), [1], [12])]


def test_priority_self_preemption_goes_on_with_the_requests_behind_it():
    """5 blocks of 4 tokens. Step 0 admits request 0 (priority 0, 1 block) and request 1 (priority
    5, 7 tokens, 2 blocks); step 1 request 2 (priority 0, arrived at 1 ms), and request 0's decode
    takes a block: none is free. In step 2 request 1 needs a third block; it is the least urgent,
    so it preempts itself, and the scan goes on: request 2 takes a block of the two it freed."""
    result = _priority_run([(0.0, 4, 10), (0.0, 7, 10), (0.001, 4, 10)], [0, 5, 0], 5)
    step2 = round(cost(11) + cost(6), 9)
    assert batches_of(result)[:3] == [(0.0, [0, 1], [4, 7]), (round(cost(11), 9), [0, 1, 2], [1, 1, 4]),
                                      (step2, [0, 2], [1, 1])]
    restarted = result.state_events[result.state_events["state"] == "restarted"]
    assert [(round(t, 9), r) for t, r in zip(restarted["time"], restarted["request"])][0] == (step2, 1)


def test_equal_priorities_preempt_the_first_in_running_order():
    """The shortage of test_a_block_shortage_preempts_the_tail_of_running under the priority
    policy with equal priorities and arrivals: vLLM's max() keeps the first of equals, request 0,
    which needs the block itself; it preempts itself and request 1 runs on alone."""
    result = _priority_run([(0.0, 4, 8), (0.0, 4, 8)], [0, 0], 4)
    ends = np.cumsum([cost(8)] + [cost(2)] * 4)
    assert batches_of(result)[5] == (round(ends[-1], 9), [1], [1])
    assert column(result, "num_restarts") == [1, 0]


# ---- async scheduling (vLLM's default) ---------------------------------------------------------


def _started(result) -> list[tuple]:
    """(start, request ids, tokens) per batch in the order the GPU runs them."""
    stages = result.batch_stages.set_index("batch_id")["start"]
    rows = result.batches.sort_values("batch_id")
    return sorted((round(stages[b], 9), list(ids), list(tok)) for b, ids, tok in
                  zip(rows["batch_id"], rows["request_ids"], rows["request_tokens"]))


def test_async_schedules_the_next_step_while_this_one_runs_and_never_one_too_many():
    """One request, 4-token prompt, 3 outputs. Step 1 is scheduled at 0 s with step 0 (the
    prompt's token to come is a placeholder) and starts when step 0 ends; step 2 is scheduled
    when step 0's output arrives. When step 1's output arrives, step 2 in flight brings the last
    token: nothing is scheduled, and the request finishes as step 2 ends."""
    result = simulate([(0.0, 4, 3)], "vllm_v1")
    assert batches_of(result) == [(0.0, [0], [4]), (0.0, [0], [1]), (round(cost(4), 9), [0], [1])]
    assert _started(result) == [(0.0, [0], [4]), (round(cost(4), 9), [0], [1]),
                                (round(cost(4) + cost(1), 9), [0], [1])]
    assert round(column(result, "completed_at")[0], 9) == round(cost(4) + 2 * cost(1), 9)


def test_async_a_newcomer_joins_the_step_after_next():
    """Request 1 arrives at 5 ms while step 0 runs; step 1 was already scheduled at 0 s, so it
    joins step 2 (scheduled at 14 ms when step 0's output arrives, started at 25 ms); the serial
    loop would run it in step 1, at 14 ms."""
    rows = [(0.0, 4, 10), (0.005, 4, 2)]
    result = simulate(rows, "vllm_v1")
    assert _started(result)[:3] == [(0.0, [0], [4]), (round(cost(4), 9), [0], [1]),
                                    (round(cost(4) + cost(1), 9), [0, 1], [1, 4])]
    assert column(result, "scheduled_at")[1] == round(cost(4) + cost(1), 9)
    serial = simulate(rows, "vllm_v1", scheduler=SERIAL)
    assert column(serial, "scheduled_at")[1] == round(cost(4), 9)


def test_async_a_request_preempted_while_its_step_runs_still_gets_that_steps_token():
    """The shortage of test_a_block_shortage_preempts_the_tail_of_running, async: step 5 is
    scheduled when step 3's output arrives (54 ms), while step 4 runs, and preempts request 1
    there. Step 4 still yields request 1's fifth output, which joins its prompt: it is
    recomputed as 9 tokens, as in the serial loop. The GPU runs the same steps at the same
    times; only the preemption is decided one step earlier."""
    rows = [(0.0, 4, 8), (0.0, 4, 8), (0.06, 1, 1)]
    result = simulate(rows, "vllm_v1", scheduler={"num_blocks": 4, "block_size": 4, **NO_CACHE})
    serial = simulate(rows, "vllm_v1", scheduler={"num_blocks": 4, "block_size": 4, **NO_CACHE, **SERIAL})
    assert _started(result) == _started(serial)
    ends = np.cumsum([cost(8)] + [cost(2)] * 4)
    restarted = result.state_events[result.state_events["state"] == "restarted"]
    assert [[round(t, 9), r] for t, r in zip(restarted["time"], restarted["request"])] == [[round(ends[-2], 9), 1]]
    # request 1's prompts: 4 tokens first, 4 + 5 outputs when it is admitted again
    assert [n for _, ids, tok in _started(result) for r, n in zip(ids, tok) if r == 1 and n > 1] == [4, 9]
