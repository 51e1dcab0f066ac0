"""orca: every admitted request reserves max_model_len // block_size blocks up front."""

from conftest import batches_of, column, cost, simulate


def test_orca_reserves_the_maximum_and_mixes_new_prompts_with_decodes():
    """max_model_len 64 / block 16 = 4 blocks per request and 12 blocks: three requests fit.
    A new prompt joins the decodes of the running ones in the same batch; the fourth request
    waits until a reservation is freed."""
    rows = [(0.0, 16, 2), (0.0, 16, 2), (0.02, 16, 2), (0.02, 16, 2)]
    result = simulate(rows, "orca", max_model_len=64, scheduler={"num_blocks": 12})
    t1 = cost(32)
    t2 = t1 + cost(18)
    t3 = t2 + cost(17)
    t4 = t3 + cost(1)
    assert batches_of(result) == [(0.0, [0, 1], [16, 16]), (round(t1, 9), [0, 1, 2], [1, 1, 16]),
                                  (round(t2, 9), [2, 3], [1, 16]), (round(t3, 9), [3], [1])]
    assert column(result, "completed_at") == [t2, t2, t3, t4]
    held = result.block_events[result.block_events["delta"] == 1].groupby("request")["block"].count()
    assert held.tolist() == [4, 4, 4, 4]  # no growth: the whole reservation at admission
