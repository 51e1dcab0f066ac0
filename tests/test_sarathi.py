"""sarathi (Sarathi-Serve as Vidur models it): decodes and prompt chunks share one budget."""

from conftest import batches_of, column, cost, simulate


def test_decodes_and_a_prompt_chunk_share_the_chunk_budget():
    """Chunk budget 8: request 0 prefills 4 tokens; request 1, arriving during it, gets the 7
    tokens left after request 0's decode, then its last 5 beside the next decode."""
    result = simulate([(0.0, 4, 3), (0.001, 12, 2)], "sarathi",
                      scheduler={"chunk_size": 8, "block_size": 4, "num_blocks": 20})
    t1 = cost(4)
    t2 = t1 + cost(8)
    t3 = t2 + cost(6)
    t4 = t3 + cost(1)
    assert batches_of(result) == [(0.0, [0], [4]), (round(t1, 9), [0, 1], [1, 7]),
                                  (round(t2, 9), [0, 1], [1, 5]), (round(t3, 9), [1], [1])]
    assert column(result, "prefill_completed_at") == [t1, t3]
    assert column(result, "completed_at") == [t3, t4]


def test_a_long_prompt_is_split_into_chunks_and_the_next_request_waits_for_budget():
    """A 12-token prompt with an 8-token budget takes two iterations; the second request only
    gets the 4 tokens left beside the first one's last chunk."""
    result = simulate([(0.0, 12, 2), (0.0, 4, 3)], "sarathi",
                      scheduler={"chunk_size": 8, "block_size": 4, "num_blocks": 20})
    t1 = cost(8)
    t2 = t1 + cost(8)
    t3 = t2 + cost(2)
    assert batches_of(result)[:3] == [(0.0, [0], [8]), (round(t1, 9), [0, 1], [4, 4]),
                                      (round(t2, 9), [0, 1], [1, 1])]
    assert column(result, "prefill_completed_at") == [t2, t2]
    assert column(result, "completed_at")[0] == t3


def test_block_shortage_restarts_the_last_running_request():
    """With too few blocks for both to grow, the later request is restarted and re-prefilled."""
    result = simulate([(0.0, 8, 10), (0.0, 8, 10)], "sarathi",
                      scheduler={"chunk_size": 64, "block_size": 4, "num_blocks": 6})
    assert column(result, "num_restarts")[0] == 0
    assert column(result, "num_restarts")[1] >= 1
    assert column(result, "status") == ["finished", "finished"]


def test_a_request_whose_restarted_prompt_no_longer_fits_is_reported_not_hung():
    """Pool of 30 blocks of 2 tokens with a watermark of 12: a new prompt may take at most 18
    blocks (36 tokens). Request 1 is preempted after decoding past that, so its restarted
    prompt can never be admitted: Vidur would stop with it queued forever; here the run ends
    and the request is reported as rejected with the state it was stuck in."""
    result = simulate([(0.01, 5, 32), (0.03, 23, 34)], "sarathi",
                      scheduler={"block_size": 2, "num_blocks": 30, "watermark_blocks_fraction": 0.4,
                                 "chunk_size": 13})
    assert column(result, "status") == ["finished", "rejected"]
    assert column(result, "num_restarts") == [0, 1]
    reason = result.requests["reject_reason"][1]
    assert reason.startswith("never finished: still waiting in the queue of replica 0")
    assert "after 1 restart(s)" in reason
