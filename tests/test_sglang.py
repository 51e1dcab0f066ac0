"""sglang (SGLang v0.4): prefill batch first, else decode all running; padding, retraction,
truncation, overlap. Costs are linear: 10 ms + 1 ms per token (conftest) unless said."""

import numpy as np
import pytest
from conftest import batches_of, column, cost, simulate

from sim_core import parse_config, run_simulation
from sim_core.engine.overlap import OverlapClock
from sim_core.predictor import BatchShape, build_predictor
from sim_core.workload import Workload

NO_GRAPHS = {"cuda_graph_batch_sizes": []}


def test_a_prefill_batch_runs_whenever_one_can_be_formed_and_decodes_wait():
    """Request 1 arrives while request 0 prefills: its prefill runs next, alone, and only then
    do both decode together."""
    result = simulate([(0.0, 8, 3), (0.005, 8, 3)], "sglang", scheduler=NO_GRAPHS)
    t1 = cost(8)
    t2 = t1 + cost(8)
    assert batches_of(result) == [(0.0, [0], [8]), (round(t1, 9), [1], [8]), (round(t2, 9), [0, 1], [1, 1]),
                                  (round(t2 + cost(2), 9), [0, 1], [1, 1])]


def test_a_long_prompt_runs_in_chunks_and_stalls_running_decodes_meanwhile():
    """chunked_prefill_size 16: request 1's 40-token prompt takes three prefill batches
    (16, 16, 8) during which request 0 does not decode (no mixed batches)."""
    result = simulate([(0.0, 4, 5), (0.005, 40, 2)], "sglang",
                      scheduler={"chunked_prefill_size": 16, "block_size": 4, **NO_GRAPHS})
    t = np.cumsum([cost(4), cost(16), cost(16), cost(8)])
    assert batches_of(result)[:5] == [(0.0, [0], [4]), (round(t[0], 9), [1], [16]), (round(t[1], 9), [1], [16]),
                                      (round(t[2], 9), [1], [8]), (round(t[3], 9), [0, 1], [1, 1])]


def test_the_prefill_token_budget_splits_a_queue_but_the_first_request_may_exceed_it():
    """max_prefill_tokens 25, blocks of 1: two 10-token prompts share a batch, the third (it
    would make 30) waits for the next; a lone 30-token prompt runs anyway."""
    result = simulate([(0.0, 10, 2)] * 3, "sglang", scheduler={"max_prefill_tokens": 25, "block_size": 1, **NO_GRAPHS})
    assert batches_of(result)[:2] == [(0.0, [0, 1], [10, 10]), (round(cost(20), 9), [2], [10])]
    alone = simulate([(0.0, 30, 2)], "sglang", scheduler={"max_prefill_tokens": 25, "block_size": 1, **NO_GRAPHS})
    assert batches_of(alone)[0] == (0.0, [0], [30])


@pytest.mark.parametrize("fast_forward", [False, True])
def test_the_last_chunk_of_a_prompt_is_billed_a_whole_block(fast_forward):
    """4 blocks of 16, no radix cache, max_prefill_tokens 17, chunked_prefill_size 48; prompts
    of 1, 49 and 1 tokens with one output each, all at t=0. Each admission is billed in whole
    blocks (SGLang's PrefillAdder._update_prefill_budget rounds every extend up to pages, the
    last chunk of a chunked prompt included):
      t=0      request 0 (1 token, billed 16 + 1 output) runs; request 1 needs 49 + 1 = 50 of the
               64 - 17 = 47 left: NO_TOKEN. Request 0 ends with its prefill (10 + 1 = 11 ms).
      t=0.011  request 1 alone: 49 tokens pass chunked_prefill_size 48, so its first 48 run
               (3 blocks; 10 + 48 = 58 ms).
      t=0.069  its last token takes the 4th block: billed 16 + 1 output of the 16 free tokens,
               leaving -1, so request 2 (1 + 1) is NO_TOKEN and waits (billed as 1 token, it was
               admitted and found no block: 'eviction did not free enough blocks'). 11 ms.
      t=0.080  request 1 has finished and freed its blocks: request 2 runs (11 ms)."""
    result = simulate([(0.0, 1, 1), (0.0, 49, 1), (0.0, 1, 1)], "sglang",
                      scheduler={"num_blocks": 4, "block_size": 16, "enable_prefix_caching": False,
                                 "max_prefill_tokens": 17, "chunked_prefill_size": 48,
                                 "enable_overlap_schedule": False, **NO_GRAPHS},
                      engine={"fast_forward": fast_forward})
    assert batches_of(result) == [(0.0, [0], [1]), (0.011, [1], [48]), (0.069, [1], [1]), (0.08, [2], [1])]


def test_request_slots_cap_the_running_batch():
    """max_running_requests 2: the third request waits until one of the first two finishes."""
    result = simulate([(0.0, 4, 3)] * 3, "sglang", scheduler={"max_running_requests": 2, **NO_GRAPHS})
    ids = [ids for _, ids, _ in batches_of(result)]
    assert ids == [[0, 1], [0, 1], [0, 1], [2], [2], [2]]


def test_decode_batches_are_padded_to_the_next_cuda_graph_size_and_priced_padded():
    """Graphs for 1, 2, 4, 8: three decoding requests run as a batch of 4 (10 + 4 x 1 ms),
    recorded with padded_size 4; the prefill batch is never padded."""
    result = simulate([(0.0, 4, 3)] * 3, "sglang", scheduler={"cuda_graph_batch_sizes": [8, 1, 4, 2]})
    t1 = cost(12)
    assert batches_of(result) == [(0.0, [0, 1, 2], [4, 4, 4]), (round(t1, 9), [0, 1, 2], [1, 1, 1]),
                                  (round(t1 + cost(4), 9), [0, 1, 2], [1, 1, 1])]
    assert result.batches["padded_size"].tolist() == [3, 4, 4]
    assert result.batch_stages["end"].iloc[-1] == pytest.approx(t1 + 2 * cost(4), abs=1e-12)


def test_a_batch_larger_than_every_graph_runs_unpadded():
    result = simulate([(0.0, 4, 2)] * 3, "sglang", scheduler={"cuda_graph_batch_sizes": [1, 2]})
    assert result.batches["padded_size"].tolist() == [3, 3]


def test_when_decodes_outgrow_memory_the_request_with_fewest_outputs_is_retracted():
    """104 blocks of 1 token. Request 0 (2 + 61 tokens) runs; request 1 (3 + 55) is admitted
    after it because running requests reserve only 0.7 of their remaining outputs. Decoding
    together they use 2 blocks per step and after 49 steps the pool is short: both have 50
    outputs, so the longer prompt (request 1) is retracted to the back of the queue. Request 0
    decodes alone; request 1 comes back once it has finished, its cached 3-token prompt a hit."""
    result = simulate([(0.0, 2, 61), (0.001, 3, 55)], "sglang",
                      scheduler={"num_blocks": 104, "block_size": 1, **NO_GRAPHS})
    batches = batches_of(result)
    shortage = cost(2) + cost(3) + 49 * cost(2)
    assert batches[:3] == [(0.0, [0], [2]), (round(cost(2), 9), [1], [3]),
                           (round(cost(2) + cost(3), 9), [0, 1], [1, 1])]
    assert batches[50:52] == [(round(shortage - cost(2), 9), [0, 1], [1, 1]), (round(shortage, 9), [0], [1])]
    restarted = result.state_events[result.state_events["state"] == "restarted"]
    assert [[round(t, 9), r] for t, r in zip(restarted["time"], restarted["request"])] == [[round(shortage, 9), 1]]
    back = [b for b in batches if b[1] == [1] and b[2] != [1]]
    assert back[-1][2] == [50]        # 53 tokens known, 3 cached
    assert column(result, "num_cached_tokens") == [0, 3] and column(result, "status") == ["finished", "finished"]


def test_a_request_reaching_max_model_len_finishes_there_truncated():
    """max_model_len 16: a 10-token prompt asking for 20 outputs gets 6 and is counted."""
    result = simulate([(0.0, 10, 20), (0.0, 4, 3)], "sglang", max_model_len=16, scheduler=NO_GRAPHS)
    assert column(result, "num_decode_tokens") == [6, 3]
    assert column(result, "truncated") == [True, False]
    assert result.summary["num_truncated"] == 1
    assert column(result, "status") == ["finished", "finished"]


def test_a_prompt_reaching_max_model_len_is_rejected_not_clipped():
    result = simulate([(0.0, 16, 2)], "sglang", max_model_len=16)
    assert column(result, "status") == ["rejected"]
    assert "reaches SGLang's request limit 16" in result.requests["reject_reason"][0]


def test_the_radix_cache_shares_a_system_prompt_and_a_previous_turn():
    """Blocks of 1. Requests 0 and 1 share a 6-token system prompt (group 3); request 2 is
    request 0's next turn (prefix = its 10-token prompt + 4 outputs). Request 1 finds 6 cached
    tokens; request 2 finds 13 (the last output token never got KV)."""
    workload = Workload(np.array([0.0, 1.0, 2.0]), np.array([10, 8, 16]), np.array([4, 2, 2]), "t",
                        session_id=np.array([0, 1, 0]), prefix_group=np.array([3, 3, 3]),
                        prefix_len=np.array([6, 6, 14]))
    config = parse_config({"max_model_len": 2048, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
                           "scheduler": {"type": "sglang", "num_blocks": 100, "block_size": 1},
                           "engine": {"record": "full"}})
    result = run_simulation(config, workload)
    assert column(result, "num_cached_tokens") == [0, 6, 13]
    assert [tokens for _, _, tokens in batches_of(result) if len(tokens) == 1 and tokens[0] > 1] == [[10], [2], [3]]


# ---- overlap scheduling --------------------------------------------------------------------


class FixedCost:
    """A cost model with round numbers: 10 ms per iteration, of which 4 ms are CPU phases."""

    def __init__(self, gpu: float = 0.006) -> None:
        self.gpu = gpu

    def stage_time(self, shape, stage):
        return self.gpu + 0.004

    def cpu_times(self, num_requests):
        return {"cpu_schedule": 0.001, "cpu_prepare_inputs": 0.0015, "cpu_sample": 0.0005,
                "cpu_process_outputs": 0.001}


def test_overlap_hides_schedule_and_output_processing_behind_the_previous_gpu_time():
    """Back to back, each iteration after the first hides 1 + 1 ms of CPU time: 10, 8, 8 ms;
    after an idle gap nothing is hidden again: 10 ms."""
    clock, shape = OverlapClock([FixedCost()], [("schedule", "process_outputs")]), BatchShape(1, 1)
    durations, now = [], 0.0
    for _ in range(3):                  # each starts when the previous ends (as the kernel does)
        durations.append(clock.iteration_time(0, shape, now))
        now += durations[-1]
    assert durations == pytest.approx([0.010, 0.008, 0.008], abs=1e-15)
    assert clock.hidden_s == pytest.approx(0.004)
    assert clock.iteration_time(0, shape, now + 0.5) == 0.010


def test_overlap_hides_no_more_than_the_previous_gpu_time():
    """A previous iteration with only 0.5 ms of GPU work hides 0.5 of the 2 ms."""
    short, clock = FixedCost(gpu=0.0005), OverlapClock([FixedCost()], [("schedule", "process_outputs")])
    clock.predictors[0] = short
    first = clock.iteration_time(0, BatchShape(1, 1), 0.0)
    clock.predictors[0] = FixedCost()
    assert clock.iteration_time(0, BatchShape(1, 1), first) == pytest.approx(0.0095, abs=1e-15)


def test_overlap_in_a_run_shortens_back_to_back_iterations_by_the_hidden_cpu_time():
    """Roofline cost model with explicit CPU phases: the second iteration (a decode right after
    the prefill) is shorter with overlap by min(schedule + process outputs, prefill GPU time)."""
    scenario = {"max_model_len": 2048, "model": "llama-2-7b", "device": "a100-80gb",
                "predictor": {"type": "roofline", "cpu_schedule_s": 0.002, "cpu_schedule_per_request_s": 0.0,
                              "cpu_process_outputs_s": 0.003, "cpu_process_outputs_per_request_s": 0.0},
                "scheduler": {"type": "sglang", "num_blocks": 100, **NO_GRAPHS}}
    workload = Workload(np.array([0.0]), np.array([512]), np.array([3]), "t")
    runs = {}
    for overlap in (True, False):
        scenario["scheduler"]["enable_overlap_schedule"] = overlap
        runs[overlap] = run_simulation(parse_config(scenario), workload).batch_stages
    config = parse_config(scenario)
    predictor = build_predictor(config)
    prefill = BatchShape(1, 512, ((512, 0),), 0, 0)
    gpu = predictor.stage_time(prefill, 0) - sum(predictor.cpu_times(1).values())
    plain, overlapped = (runs[o]["end"] - runs[o]["start"] for o in (False, True))
    assert overlapped[0] == plain[0]                          # nothing before the first
    assert plain[1] - overlapped[1] == pytest.approx(min(0.005, gpu), abs=1e-12)
    assert gpu > 0.005 and plain[1] - overlapped[1] == pytest.approx(0.005, abs=1e-12)


def test_the_gantt_hatches_padded_batches_and_names_the_gpu_batch_size():
    """Three decodes padded to 4: the decode bars are hatched and their hover data holds 4."""
    from sim_core.viz.gantt import pipeline_gantt

    result = simulate([(0.0, 4, 3)] * 3, "sglang", scheduler={"cuda_graph_batch_sizes": [1, 2, 4, 8]})
    traces = {trace.name: trace for trace in pipeline_gantt(result).data}
    assert list(traces["decode"].marker.pattern.shape) == ["/", "/"]
    assert list(traces["prefill"].marker.pattern.shape) == [""]
    assert [row[5] for row in traces["decode"].customdata] == [4, 4]
    assert "GPU batch %{customdata[5]}" in traces["decode"].hovertemplate
