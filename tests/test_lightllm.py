"""lightllm: token-level KV, an admission estimate of the peak, separate prefill/decode."""

from conftest import batches_of, column, cost, simulate

LIGHT = {"block_size": 1, "num_blocks": 35, "max_waiting_iters": 3}


def test_admission_estimate_refuses_until_the_projected_peak_fits():
    """Pool of 35 tokens. Request 1 is refused at first (projected peak 38, then 35: not below
    35); at the third periodic prefill try request 0 has 2 tokens to go, the peak is 32 and
    request 1 is admitted in a prefill-only batch."""
    result = simulate([(0.0, 10, 10), (0.0, 10, 10)], "lightllm", scheduler=LIGHT)
    batches = batches_of(result)
    assert batches[0] == (0.0, [0], [10])
    assert [ids for _, ids, _ in batches[1:8]] == [[0]] * 6 + [[1]]
    t = cost(10)
    for _ in range(6):
        t += cost(1)
    assert column(result, "scheduled_at") == [0.0, t]
    assert batches[7] == (round(t, 9), [1], [10])
    t_b = t + cost(10)
    assert column(result, "prefill_completed_at") == [cost(10), t_b]
    assert batches[8] == (round(t_b, 9), [0, 1], [1, 1])


def test_decode_batches_hold_all_running_requests_and_take_one_token_each():
    result = simulate([(0.0, 5, 4), (0.0, 6, 3)], "lightllm", scheduler={"block_size": 1, "num_blocks": 100})
    assert [ids for _, ids, _ in batches_of(result)] == [[0, 1], [0, 1], [0, 1], [0]]
    taken = result.block_events[result.block_events["delta"] == 1].groupby("request")["block"].count()
    assert taken.tolist() == [5 + 3, 6 + 2]  # the prompt, then one token per decode iteration
