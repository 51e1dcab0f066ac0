"""faster_transformer: static batches run to completion before new requests are admitted."""

from conftest import batches_of, column, cost, simulate


def test_static_batch_runs_to_completion_before_admitting():
    """Request 2 arrives while a static batch runs; although memory is free it waits until
    every member of that batch has finished, then all their blocks are freed at once."""
    rows = [(0.0, 16, 3), (0.0, 16, 1), (0.01, 16, 1)]
    result = simulate(rows, "faster_transformer", max_model_len=64)
    t1 = cost(32)
    t2 = t1 + cost(1)
    t3 = t2 + cost(1)
    t4 = t3 + cost(16)
    assert batches_of(result) == [(0.0, [0, 1], [16, 16]), (round(t1, 9), [0], [1]),
                                  (round(t2, 9), [0], [1]), (round(t3, 9), [2], [16])]
    assert column(result, "scheduled_at") == [0.0, 0.0, t3]
    assert column(result, "completed_at") == [t3, t1, t4]
    frees = result.block_events[result.block_events["delta"] == -1]
    # request 1 finished at t1 but its reservation is returned with its batch's, at t3
    assert sorted(frees[frees["time"] == t3]["request"].unique().tolist()) == [0, 1]
