"""Same-time events follow Vidur's (time, creation) order: arrivals come first."""

from conftest import batches_of, cost, simulate


def test_an_arrival_at_a_batch_end_is_seen_by_that_formation():
    """Request 1 arrives exactly when request 0's prefill ends: the next batch is its prefill."""
    end = cost(16)
    result = simulate([(0.0, 16, 5), (end, 16, 1)])
    assert batches_of(result)[1] == (round(end, 9), [1], [16])


def test_an_arrival_just_after_a_batch_end_waits_one_iteration():
    end = cost(16)
    result = simulate([(0.0, 16, 5), (end + 1e-6, 16, 1)])
    assert batches_of(result)[1] == (round(end, 9), [0], [1])
    assert batches_of(result)[2][1] == [1]
