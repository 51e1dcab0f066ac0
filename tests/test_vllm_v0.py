"""vllm_v0 (vLLM's V0-engine scheduler): narrated scenarios with exact batches, blocks and times.

Costs: 10 ms + 1 ms per token (conftest). KV swaps and copies are priced from the model
(Llama-2-7B: 32 layers x 32 KV heads x head_dim 128, fp16) and the A100's links: one block of
4 tokens is 2 x 4 x 128 x 32 x 32 x 2 = 2,097,152 bytes; a swap moves it over PCIe Gen4
(32 GB/s), a copy reads and writes it in HBM (2,039 GB/s).
"""

import numpy as np
from conftest import batches_of, column, cost, scenario

from sim_core import parse_config, run_simulation
from sim_core.viz.kv_blocks import swap_use
from sim_core.workload import Workload

BLOCK_BYTES = 2 * 4 * 128 * 32 * 32 * 2
SWAP = BLOCK_BYTES / 32e9          # seconds per block swapped
COPY = 2 * BLOCK_BYTES / 2039e9    # seconds per block copied


def run(rows, n=None, **scheduler):
    """rows: (arrived_at, prompt, output); n: parallel samples per row; block size 4 unless given."""
    arrived, prefill, decode = zip(*rows)
    workload = Workload(np.array(arrived, float), np.array(prefill, np.int64), np.array(decode, np.int64), "test",
                        n=None if n is None else np.array(n, np.int64))
    config = scenario("vllm_v0", scheduler={"block_size": 4, **scheduler})
    return run_simulation(parse_config(config), workload)


def timeline(start, *steps):
    """Formation times: each step adds its cost to the previous time, as the simulator does."""
    times = [start]
    for step in steps:
        times.append(times[-1] + step)
    return times


def ops_of(result):
    """(batch id, request, kind, blocks) of every KV swap or copy, in order."""
    ops = result.cache_ops
    return list(zip(ops["batch_id"], ops["request_id"], ops["kind"].astype(str), ops["num_blocks"]))


def states_of(result, request):
    events = result.state_events[result.state_events["request"] == request]
    return [(round(t, 9), str(s)) for t, s in zip(events["time"], events["state"])]


def allocated(result, request):
    events = result.block_events
    return events[(events["request"] == request) & (events["delta"] == 1)]["block"].tolist()


def test_swapped_requests_are_served_before_waiting_ones():
    """Six blocks of four tokens. A and B prefill together; when the pool runs dry B (the last
    running) is swapped out. C arrives at 0.05 needing one block while three are free, but while
    anything is swapped no prompt is admitted: C waits until A finishes and B is swapped back in,
    then gets a prefill-only batch (B's decode pauses for it)."""
    result = run([(0.0, 8, 10), (0.0, 8, 10), (0.05, 4, 2)], num_blocks=6, preemption_mode="swap")
    t = timeline(0.0, cost(16), cost(2), cost(1) + 3 * SWAP, *[cost(1)] * 7, cost(1) + 3 * SWAP, cost(4), cost(2),
                 *[cost(1)] * 6)
    expected = [(t[0], [0, 1], [8, 8]), (t[1], [0, 1], [1, 1]), (t[2], [0], [1])]
    expected += [(t[k], [0], [1]) for k in range(3, 10)]   # A alone: tokens 11..17; A finishes at t[10]
    expected += [(t[10], [1], [1]), (t[11], [2], [4]), (t[12], [1, 2], [1, 1])]
    assert batches_of(result)[:13] == [(round(time, 9), ids, tokens) for time, ids, tokens in expected]
    assert ops_of(result) == [(2, 1, "swap_out", 3), (10, 1, "swap_in", 3)]
    assert states_of(result, 1) == [(0.0, "queued"), (0.0, "admitted"), (round(t[2], 9), "swapped_out"),
                                    (round(t[10], 9), "swapped_in"), (round(t[19], 9), "finished")]
    assert column(result, "scheduled_at")[2] == t[11]
    series = result.timeseries
    assert series[series["time"] == t[4]]["kv_blocks_used"].tolist() == [3, 3]   # 3 of 6 free while C waits
    assert allocated(result, 0) == [0, 1, 4, 2, 3]
    # B is swapped back in on new ids 0, 1, 4 and later grows onto 2 and 3, which C held
    assert allocated(result, 1) == [2, 3, 5, 0, 1, 4, 2, 3]
    assert allocated(result, 2) == [2, 3]
    assert column(result, "num_swaps") == [0, 1, 0] and column(result, "num_restarts") == [0, 0, 0]


def test_the_cpu_swap_space_holds_the_swapped_blocks_until_the_swap_in():
    """The run above: B's 3 blocks take 3 CPU blocks at t[2] and give them back at t[10]. The
    default 4 GiB swap space holds 4 GiB / 2,097,152 bytes = 2,048 blocks of 4 tokens."""
    result = run([(0.0, 8, 10), (0.0, 8, 10), (0.05, 4, 2)], num_blocks=6, preemption_mode="swap")
    t = timeline(0.0, cost(16), cost(2), cost(1) + 3 * SWAP, *[cost(1)] * 7)
    assert result.replicas[0].num_swap_blocks == 4 * 1024**3 // BLOCK_BYTES == 2048
    use = swap_use(result, 0)
    assert [round(x, 9) for x in use["time"]] == [0.0, round(t[2], 9), round(t[10], 9)]
    assert use["held"].tolist() == [0, 3, 0]
    assert use["fraction"].tolist() == [0.0, 3 / 2048, 0.0]
    assert swap_use(run([(0.0, 8, 2)]), 0).empty


def test_no_swap_in_in_a_step_that_preempted():
    """Nine blocks. X is swapped out early; later B must preempt itself (nothing behind it) and its
    four blocks free exactly what X needs to come back (3 blocks + 1 for its token), yet that step
    swaps nobody in; X returns at the next step, ahead of B (swapped queue order)."""
    result = run([(0.0, 8, 20), (0.0, 8, 20), (0.0, 8, 10)], num_blocks=9, preemption_mode="swap")
    t = timeline(0.0, cost(24), cost(3), cost(2) + 3 * SWAP, *[cost(2)] * 5, cost(2), cost(1) + 4 * SWAP)
    expected = [(t[0], [0, 1, 2], [8, 8, 8]), (t[1], [0, 1, 2], [1, 1, 1])]
    expected += [(t[k], [0, 1], [1, 1]) for k in range(2, 9)]
    expected += [(t[9], [0], [1]), (t[10], [0, 2], [1, 1])]
    assert batches_of(result)[:11] == [(round(time, 9), ids, tokens) for time, ids, tokens in expected]
    assert ops_of(result)[:3] == [(2, 2, "swap_out", 3), (9, 1, "swap_out", 4), (10, 2, "swap_in", 3)]
    assert states_of(result, 2)[2:4] == [(round(t[2], 9), "swapped_out"), (round(t[10], 9), "swapped_in")]
    assert allocated(result, 2)[:6] == [4, 5, 8, 2, 3, 7]   # back in on B's freed blocks 2, 3, 7


def test_prompts_too_long_for_the_model_or_the_cache_are_ignored():
    """With a 64-token budget (no chunking) a 100-token prompt exceeds the prompt limit; with ten
    blocks and a one-block watermark a 40-token prompt (10 blocks) never fits. Both are ignored
    when they reach the queue head; the requests behind them still run."""
    result = run([(0.0, 100, 2), (0.0, 16, 2)], num_blocks=100, max_num_batched_tokens=64)
    assert column(result, "status") == ["ignored", "finished"]
    assert result.requests["reject_reason"][0] == ("ignored: its prompt of 100 tokens exceeds the limit 64 "
                                                   "(min(max_model_len, max_num_batched_tokens))")
    assert batches_of(result) == [(0.0, [1], [16]), (round(cost(16), 9), [1], [1])]
    assert states_of(result, 0) == [(0.0, "queued"), (0.0, "ignored")]
    assert result.summary["num_ignored"] == 1 and result.summary["num_rejected"] == 0

    result = run([(0.0, 40, 2), (0.0, 36, 2)], num_blocks=10, watermark_blocks_fraction=0.1)
    assert column(result, "status") == ["ignored", "finished"]
    assert result.requests["reject_reason"][0] == ("ignored: its prompt needs 10 KV blocks but at most 9 can be "
                                                   "allocated (10 blocks minus a watermark of 1)")
    assert allocated(result, 1) == list(range(10))   # 9 for its prompt (the watermark left free), 1 to decode
    assert "1 request(s) ignored by vllm_v0: see reject_reason" in result.notes


def test_a_swapped_request_that_can_never_resume_is_ignored():
    """Four blocks, one request: at token 14 it holds all four and needs a free block for its
    step, so it swaps itself out; swapping back in would need 4 + 1 blocks, more than exist, so
    the next step (at once) ignores it."""
    result = run([(0.0, 8, 40)], num_blocks=4, preemption_mode="swap")
    t = timeline(0.0, cost(8), *[cost(1)] * 5)
    assert batches_of(result) == [(0.0, [0], [8])] + [(round(time, 9), [0], [1]) for time in t[1:6]]
    assert states_of(result, 0)[-2:] == [(round(t[6], 9), "swapped_out"), (round(t[6], 9), "ignored")]
    assert result.requests["reject_reason"][0] == ("ignored: swapped out, it needs 5 KV blocks to resume "
                                                   "(its blocks + one per sequence) but the replica has 4")
    assert column(result, "num_swaps") == [1]


def _swap_or_recompute(mode):
    # a one-block watermark keeps B out until A finishes in both modes
    return run([(0.0, 8, 10), (0.0, 8, 10)], num_blocks=6, watermark_blocks_fraction=0.17, preemption_mode=mode)


def test_swap_and_recompute_restart_at_different_costs():
    """A and B share six blocks; at A's third token B is preempted. Swap copies B's 3 blocks to
    CPU (charged to that step) and back when A is done, then B decodes its 11th token; recompute
    frees them and B re-prefills its 10 tokens instead. Everything else is identical."""
    swap, recompute = _swap_or_recompute("swap"), _swap_or_recompute("recompute")
    t_swap = timeline(0.0, cost(16), cost(2), cost(1) + 3 * SWAP, *[cost(1)] * 7, cost(1) + 3 * SWAP, *[cost(1)] * 7)
    t_rec = timeline(0.0, cost(16), cost(2), cost(1), *[cost(1)] * 7, cost(10), *[cost(1)] * 7)
    assert batches_of(swap)[10] == (round(t_swap[10], 9), [1], [1])        # resumes with one token
    assert batches_of(recompute)[10] == (round(t_rec[10], 9), [1], [10])   # resumes by re-prefilling
    assert column(swap, "completed_at") == [t_swap[10], t_swap[18]]
    assert column(recompute, "completed_at") == [t_rec[10], t_rec[18]]
    assert ops_of(swap) == [(2, 1, "swap_out", 3), (10, 1, "swap_in", 3)] and not len(recompute.cache_ops)
    assert (column(swap, "num_swaps"), column(swap, "num_restarts")) == ([0, 1], [0, 0])
    assert (column(recompute, "num_swaps"), column(recompute, "num_restarts")) == ([0, 0], [0, 1])
    assert swap.summary["num_preemptions"] == recompute.summary["num_preemptions"] == 1
    assert swap.summary["num_swap_outs"] == 1 and recompute.summary["num_swap_outs"] == 0


def test_parallel_samples_share_the_prompt_blocks_and_copy_on_write():
    """One request asks for 3 samples of a 6-token prompt (two blocks, the second half full).
    The prefill runs the prompt once; then the three sequences share blocks 0 and 1 (3
    references each). At the first decode sequences 0 and 1 copy the partly filled block 1 into
    blocks 2 and 3 (a 2-block copy charged to that step) and sequence 2 keeps it; block 0 stays
    shared. At the 9th token every sequence's last block is full: three new blocks 4, 5, 6."""
    result = run([(0.0, 6, 5)], n=[3], num_blocks=100)
    t = timeline(0.0, cost(6), cost(3) + 2 * COPY, cost(3), cost(3), cost(3))
    assert batches_of(result) == [(0.0, [0], [6])] + [(round(time, 9), [0], [3]) for time in t[1:5]]
    events = result.block_events
    assert [(round(time, 9), b, d) for time, b, d in zip(events["time"], events["block"], events["delta"])] == [
        (0.0, 0, 1), (0.0, 1, 1), (round(t[1], 9), 2, 1), (round(t[1], 9), 3, 1),
        (round(t[3], 9), 4, 1), (round(t[3], 9), 5, 1), (round(t[3], 9), 6, 1)] + [
        (round(t[5], 9), b, -1) for b in range(7)]
    refs = result.block_refs
    assert list(zip(refs["time"].round(9), refs["block"], refs["refs"])) == [
        (round(t[1], 9), 0, 3), (round(t[1], 9), 1, 3), (round(t[1], 9), 1, 1), (round(t[5], 9), 0, 0)]
    assert ops_of(result) == [(1, 0, "copy", 2)]
    assert column(result, "prefill_completed_at") == [t[1]] and column(result, "completed_at") == [t[5]]
    assert result.summary["output_tokens_per_s"] == 3 * 5 / t[5]   # every sample's 5 tokens count


def test_a_group_is_preempted_swapped_and_restored_as_a_whole():
    """S (one sequence) and G (2 samples of a 6-token prompt) share eight blocks. G copies its
    shared last block, then both its sequences grow, filling the pool; at S's 12th token G (the
    last running) is preempted. Even in recompute mode a group is swapped, as vLLM does: one
    swap-out of its 5 distinct blocks (the shared block once). It comes back when S is done, on
    new blocks, with the shared block referenced by both sequences again."""
    result = run([(0.0, 8, 20), (0.0, 6, 6)], n=[1, 2], num_blocks=8, preemption_mode="recompute")
    t = timeline(0.0, cost(14), cost(3) + COPY, cost(3), cost(3), cost(1) + 5 * SWAP, *[cost(1)] * 15,
                 cost(2) + 5 * SWAP, cost(2))
    assert batches_of(result)[:6] == [(0.0, [0, 1], [8, 6]), (round(t[1], 9), [0, 1], [1, 2]),
                                      (round(t[2], 9), [0, 1], [1, 2]), (round(t[3], 9), [0, 1], [1, 2]),
                                      (round(t[4], 9), [0], [1]), (round(t[5], 9), [0], [1])]
    assert batches_of(result)[20:] == [(round(t[20], 9), [1], [2]), (round(t[21], 9), [1], [2])]
    assert ops_of(result) == [(1, 1, "copy", 1), (4, 1, "swap_out", 5), (20, 1, "swap_in", 5)]
    assert allocated(result, 1) == [2, 3, 5, 6, 7, 0, 1, 4, 2, 3]
    refs = result.block_refs
    assert list(zip(refs["time"].round(9), refs["block"], refs["refs"])) == [
        (round(t[1], 9), 2, 2), (round(t[1], 9), 3, 2), (round(t[1], 9), 3, 1),   # fork, copy-on-write
        (round(t[4], 9), 2, 0),                                                  # swapped out
        (round(t[20], 9), 0, 2),                                                 # back: block 0 shared
        (round(t[22], 9), 0, 0)]                                                 # finished
    assert column(result, "num_swaps") == [0, 1] and column(result, "num_restarts") == [0, 0]
    assert column(result, "completed_at") == [t[20], t[22]]


def test_chunked_prefill_runs_running_requests_first_then_new_chunks_in_the_budget():
    """A 16-token budget with chunked prefill: A's 20-token prompt runs 16 tokens, B is not
    admitted (budget spent); next step A's last 4 prompt tokens go first and B gets 8 of the
    12 left; then both decode together."""
    result = run([(0.0, 20, 3), (0.0, 8, 2)], enable_chunked_prefill=True, max_num_batched_tokens=16,
                 block_size=16)
    t = timeline(0.0, cost(16), cost(12), cost(2), cost(1))
    assert batches_of(result) == [(0.0, [0], [16]), (round(t[1], 9), [0, 1], [4, 8]),
                                  (round(t[2], 9), [0, 1], [1, 1]), (round(t[3], 9), [0], [1])]
    assert column(result, "prefill_completed_at") == [t[2], t[2]]
    assert column(result, "completed_at") == [t[4], t[3]]


def test_max_num_seqs_counts_every_sample():
    """With max_num_seqs 4, a request of 3 samples leaves room for one more sequence: of two
    2-sample requests behind it neither is admitted until it finishes."""
    result = run([(0.0, 4, 2), (0.0, 4, 2), (0.0, 4, 2)], n=[3, 2, 2], max_num_seqs=4, num_blocks=100)
    t = timeline(0.0, cost(4), cost(3), cost(8))
    assert batches_of(result) == [(0.0, [0], [4]), (round(t[1], 9), [0], [3]), (round(t[2], 9), [1, 2], [4, 4]),
                                  (round(t[3], 9), [1, 2], [2, 2])]


def test_a_group_that_finds_no_swap_space_is_recomputed_with_every_samples_tokens():
    """G asks for 2 samples of a 6-token prompt in five blocks, with no CPU swap space. At its
    10th token it holds all five and needs two free: it cannot be swapped, so it is recomputed
    (vLLM would abort): its prompt and both samples' 4 tokens, 14 tokens, are prefilled again
    at once, yielding each sample's 5th token; that needs two free blocks again, so the 16
    tokens are prefilled once more and yield the 6th, last token."""
    result = run([(0.0, 6, 6)], n=[2], num_blocks=5, swap_space_gb=0.0)
    t = timeline(0.0, cost(6), cost(2) + COPY, cost(2), cost(2), cost(14), cost(16))
    assert batches_of(result) == [(0.0, [0], [6]), (round(t[1], 9), [0], [2]), (round(t[2], 9), [0], [2]),
                                  (round(t[3], 9), [0], [2]), (round(t[4], 9), [0], [14]), (round(t[5], 9), [0], [16])]
    assert column(result, "completed_at") == [t[6]] and column(result, "num_restarts") == [2]
    assert column(result, "prefill_completed_at") == [t[1]]   # the first tokens' time is kept
