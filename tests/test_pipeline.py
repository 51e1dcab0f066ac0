"""Pipeline parallelism: a replica keeps up to PP batches in flight, one per stage."""

from conftest import column, cost, simulate


def test_two_stages_keep_two_batches_in_flight():
    """PP=2, batch cap 4 (two per micro-batch). Two prefill batches form at t=0; batch 0 moves
    to stage 1 while batch 1 starts stage 0; every stage takes the full linear time. When batch
    0 ends its requests decode in batch 2, which waits for stage 1 to finish batch 1."""
    result = simulate([(0.0, 10, 2)] * 4, cluster={"pipeline_parallel_size": 2}, scheduler={"batch_size_cap": 4})
    p, d = cost(20), cost(2)
    spans = {(r.batch_id, r.stage_id): (round(r.start, 9), round(r.end, 9)) for r in result.batch_stages.itertuples()}
    expected = {
        (0, 0): (0, p), (0, 1): (p, 2 * p),
        (1, 0): (p, 2 * p), (1, 1): (2 * p, 3 * p),
        (2, 0): (2 * p, 2 * p + d), (2, 1): (3 * p, 3 * p + d),       # queued at stage 1
        (3, 0): (3 * p, 3 * p + d), (3, 1): (3 * p + d, 3 * p + 2 * d),
    }
    assert spans == {k: (round(a, 9), round(b, 9)) for k, (a, b) in expected.items()}
    assert column(result, "prefill_completed_at") == [2 * p, 2 * p, 3 * p, 3 * p]
    assert column(result, "completed_at") == [3 * p + d] * 2 + [3 * p + 2 * d] * 2
