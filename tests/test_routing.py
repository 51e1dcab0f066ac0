"""Global schedulers: round robin by arrival index; LOR by fewest waiting (not running)."""

from conftest import column, simulate

ROWS = [(0.0, 16, 4), (0.001, 16, 4), (0.002, 16, 4), (0.003, 16, 4)]


def test_round_robin_alternates_replicas():
    result = simulate(ROWS, cluster={"num_replicas": 2, "global_scheduler": "round_robin"})
    assert column(result, "replica_id") == [0, 1, 0, 1]


def test_lor_counts_only_waiting_requests():
    """Request 0 is already running on replica 0 when request 1 arrives, so both replicas have
    zero waiting and the tie goes to replica 0; request 1 then waits there, so 2 and 3 go to 1."""
    result = simulate(ROWS, cluster={"num_replicas": 2, "global_scheduler": "lor"})
    assert column(result, "replica_id") == [0, 0, 1, 1]


def test_random_routing_is_seeded():
    rows = [(i * 0.01, 16, 4) for i in range(20)]
    one = simulate(rows, seed=7, cluster={"num_replicas": 3, "global_scheduler": "random"})
    two = simulate(rows, seed=7, cluster={"num_replicas": 3, "global_scheduler": "random"})
    other = simulate(rows, seed=8, cluster={"num_replicas": 3, "global_scheduler": "random"})
    assert column(one, "replica_id") == column(two, "replica_id")
    assert column(one, "replica_id") != column(other, "replica_id")
