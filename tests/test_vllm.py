"""vllm (Vidur's vLLM v0 model): narrated scenarios with exact batches, blocks and times."""

from conftest import batches_of, column, cost, simulate


def test_prefill_batches_run_until_the_queue_is_empty_then_decodes():
    """Three prompts arrive together: one prefill-only batch runs all of them; the next batches
    are decodes of whoever is still generating, and freed blocks are reused most-recent-first."""
    result = simulate([(0.0, 32, 3), (0.0, 16, 2), (0.0, 48, 1)])
    t1 = cost(96)
    t2 = t1 + cost(2)
    t3 = t2 + cost(1)
    assert batches_of(result) == [(0.0, [0, 1, 2], [32, 16, 48]),
                                  (round(t1, 9), [0, 1], [1, 1]),
                                  (round(t2, 9), [0], [1])]
    assert column(result, "completed_at") == [t3, t2, t1]
    assert column(result, "prefill_completed_at") == [t1, t1, t1]
    allocations = result.block_events[result.block_events["delta"] == 1]
    owned = {rid: allocations[allocations["request"] == rid]["block"].tolist() for rid in range(3)}
    # request 2 finished first; its blocks 3,4,5 return to the pool and 3, then 4, are reused
    assert owned == {0: [0, 1, 3], 1: [2, 4], 2: [3, 4, 5]}


def test_arrival_pauses_decodes_for_a_prefill_batch():
    """A prompt arriving mid-iteration gets a prefill-only batch next; the running request's
    decode waits one iteration."""
    result = simulate([(0.0, 16, 4), (0.02, 32, 2)])
    t1 = cost(16)
    t2 = t1 + cost(32)
    t3 = t2 + cost(2)
    t4 = t3 + cost(1)
    t5 = t4 + cost(1)
    assert batches_of(result) == [(0.0, [0], [16]), (round(t1, 9), [1], [32]), (round(t2, 9), [0, 1], [1, 1]),
                                  (round(t3, 9), [0], [1]), (round(t4, 9), [0], [1])]
    assert column(result, "scheduled_at") == [0.0, t1]
    assert column(result, "completed_at") == [t5, t3]


def test_preemption_restarts_the_latest_arrival_and_folds_its_tokens_into_the_prompt():
    """Six blocks of four tokens, two requests of 8 + 10 tokens: when the pool runs dry the
    later request (by arrival, then list order) is restarted; its decoded tokens become prompt,
    so it re-prefills 10, then 11, 12 and 13 tokens, while the earlier one keeps decoding."""
    rows = [(0.0, 8, 10), (0.0, 8, 10)]
    result = simulate(rows, scheduler={"block_size": 4, "num_blocks": 6})
    expected = [(0.0, [0, 1], [8, 8])]
    time = cost(16)
    script = [([0, 1], [1, 1]), ([0], [1]),          # pool dry: 1 restarted (prompt 10)
              ([1], [10]), ([0], [1]),                # re-prefill, then 1 restarted again
              ([1], [11]), ([0], [1]),
              ([1], [12]), ([0], [1]),
              ([1], [13])]
    for ids, tokens in script[:-1]:
        expected.append((round(time, 9), ids, tokens))
        time += cost(sum(tokens))
    assert batches_of(result)[:len(expected)] == expected
    assert column(result, "num_restarts") == [0, 4]
    assert column(result, "prefill_completed_at") == [cost(16), cost(16)]  # first token time is kept
    assert column(result, "num_decode_tokens") == [10, 10]  # the table shows the original request
    assert result.summary["num_preemptions"] == 4


def test_a_prompt_larger_than_the_cache_is_rejected_with_a_reason():
    """A request whose prompt can never fit is reported as rejected, the others still run."""
    result = simulate([(0.0, 16, 2), (0.0, 200, 2)], scheduler={"block_size": 4, "num_blocks": 10})
    assert column(result, "status") == ["finished", "rejected"]
    assert "prompt needs 50 KV blocks" in result.requests["reject_reason"][1]
