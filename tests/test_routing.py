"""Global schedulers: round robin by arrival index; Vidur's LOR by fewest waiting (not running);
least_outstanding by waiting + running; least_kv by KV blocks held; prefix_affinity by cached
prefix under a load cap; power_of_two by the less loaded of two seeded draws."""

import numpy as np
from conftest import column, scenario, simulate, workload

from sim_core import parse_config, run_simulation
from sim_core.engine.routing import AFFINITY_LOAD_CAP, PowerOfTwoRouter
from sim_core.workload import Workload

ROWS = [(0.0, 16, 4), (0.001, 16, 4), (0.002, 16, 4), (0.003, 16, 4)]
# request 0 decodes for about a second; the others finish within 40 ms of their arrival
LONG_AND_SHORT = [(0.0, 16, 100), (0.001, 16, 2), (0.1, 16, 2), (0.2, 16, 2)]


def routed(rows, router, num_replicas=2, **overrides):
    return column(simulate(rows, cluster={"num_replicas": num_replicas, "global_scheduler": router},
                           **overrides), "replica_id")


def test_round_robin_alternates_replicas():
    assert routed(ROWS, "round_robin") == [0, 1, 0, 1]


def test_lor_counts_only_waiting_requests():
    """Request 0 is already running on replica 0 when request 1 arrives, so both replicas have
    zero waiting and the tie goes to replica 0; request 1 then waits there, so 2 and 3 go to 1."""
    assert routed(ROWS, "lor") == [0, 0, 1, 1]


def test_lor_piles_everything_on_replica_0_while_queues_are_empty():
    """Vidur's rule: no request ever waits at an arrival (each joins the running batch at the next
    formation), so every request goes to replica 0 though replica 1 stays idle."""
    assert routed(LONG_AND_SHORT, "lor") == [0, 0, 0, 0]


def test_least_outstanding_counts_running_requests():
    """Request 1 avoids replica 0, which runs request 0; requests 2 and 3 arrive after request 1
    finished, when replica 1 is empty and replica 0 still decodes request 0, so they go to 1 too
    (round robin would send request 2 back to the busy replica 0)."""
    assert routed(LONG_AND_SHORT, "least_outstanding") == [0, 1, 1, 1]
    assert routed(LONG_AND_SHORT, "round_robin") == [0, 1, 0, 1]



def test_least_outstanding_sees_a_fast_forwarded_run_as_stepwise_does():
    """Request 0 (3 output tokens) goes to replica 0, request 1 (100) to the idle replica 1,
    request 2 (100) to replica 0 on the tie. Replica 0 prefills 0 (26 ms) and 2 (26 ms), then
    decodes both in a fast-forwarded run: request 0's last token comes at 0.076 s, but the run's
    iterations are applied only when it ends. Request 3 arrives at 0.2 s: replica 0 holds one
    unfinished request (2) as replica 1 does (1), so the tie sends it to replica 0, fast-forwarded
    or not; counting the finished request 0 would have sent it to replica 1."""
    rows = [(0.0, 16, 3), (0.0005, 16, 100), (0.001, 16, 100), (0.2, 16, 5)]
    cluster = {"num_replicas": 2, "global_scheduler": "least_outstanding"}
    seen_runs = []
    config = parse_config(scenario(cluster=cluster))
    fast = run_simulation(config, workload(*rows), after_event=lambda sim: seen_runs.append(bool(sim.fast.runs)))
    stepwise = simulate(rows, cluster=cluster, engine={"fast_forward": False})
    assert column(fast, "replica_id") == column(stepwise, "replica_id") == [0, 1, 0, 0]
    assert any(seen_runs)                      # decode runs were fast-forwarded


def test_an_arrival_at_the_instant_a_run_member_finishes_still_counts_it():
    """Every step takes 0.25 s. At 0: A (request 0, 3 tokens) goes to replica 0, A2 (1, 20
    tokens) to replica 1, B (2, 20 tokens) to replica 0 on the 1-1 tie. Replica 0 prefills A and B
    to 0.25 s and decodes them; A's third token ends the iteration at 0.75 s, inside a run that
    goes on with B (nothing waits). C (3) arrives at 0.75 s: its routing runs after that
    instant's stage ends but before their batch ends complete A, so stepwise simulation sees
    replica 0 with 2 outstanding against replica 1's 1 and sends C to replica 1. A fast-forwarded
    run must show the same (counting A as gone made it a 1-1 tie, and C went to replica 0)."""
    rows = [(0.0, 4, 3), (0.0, 4, 20), (0.0, 4, 20), (0.75, 4, 5)]
    overrides = {"cluster": {"num_replicas": 2, "global_scheduler": "least_outstanding"},
                 "predictor": {"type": "linear", "base_s": 0.25, "per_token_s": 0.0}}
    seen_runs = []
    fast = run_simulation(parse_config(scenario(**overrides)), workload(*rows),
                          after_event=lambda sim: seen_runs.append(bool(sim.fast.runs)))
    stepwise = simulate(rows, engine={"fast_forward": False}, **overrides)
    assert column(stepwise, "completed_at")[0] == 0.75
    assert column(fast, "replica_id") == column(stepwise, "replica_id") == [0, 1, 0, 1]
    assert any(seen_runs)


KV_ROWS = [(0.0, 160, 200), (0.001, 16, 200), (0.002, 16, 200), (0.5, 16, 200)]


def test_least_kv_compares_blocks_not_requests():
    """Request 0 holds 10+ blocks of 16 tokens on replica 0, so requests 1 and 2 (one block each)
    go to replica 1. least_outstanding sends request 2 to replica 0 (one request each, the tie
    to the lowest id) and, at 0.5 s, request 3 to replica 1 (two requests against one); least_kv
    sends request 3 to replica 1 as well: there its two requests hold about 8 blocks against
    about 12 for request 0 on replica 0."""
    assert routed(KV_ROWS, "least_kv") == [0, 1, 1, 1]
    assert routed(KV_ROWS, "least_outstanding") == [0, 1, 0, 1]


def _grouped(arrivals, groups, decode):
    """Prompts of 48 tokens whose first 32 are their group's shared prefix (2 blocks of 16)."""
    n = len(arrivals)
    return Workload(np.array(arrivals, dtype=float), np.full(n, 48, dtype=np.int64),
                    np.array(decode, dtype=np.int64), "t", prefix_group=np.array(groups),
                    prefix_len=np.full(n, 32))


def _affinity(workload):
    config = parse_config(scenario("vllm_v1", cluster={"num_replicas": 2, "global_scheduler": "prefix_affinity"}))
    return column(run_simulation(config, workload), "replica_id")


def test_prefix_affinity_follows_the_cached_prefix():
    """Groups A (1) and B (2) first land on replicas 0 and 1 (no hits: the less loaded, then the
    lowest id). Once both replicas are idle, each group's later requests go back to the replica
    whose cache holds its prefix, B's first even though replica 0 would win the tie."""
    workload = _grouped([0.0, 0.001, 1.0, 2.0, 3.0], [1, 2, 2, 1, 2], [4] * 5)
    assert _affinity(workload) == [0, 1, 1, 0, 1]


def test_prefix_affinity_stops_at_the_load_cap():
    """A burst of group A requests (long decodes, 1 ms apart) after A's prefix was cached on
    replica 0: the first AFFINITY_LOAD_CAP + 1 go there (loads 0 to 4 are within 4 of replica
    1's 0); the next finds replica 0 at 5 outstanding and goes to replica 1 (no hit there). That
    request puts A's prefix in replica 1's cache too (vLLM registers a prompt's full blocks when
    it allocates them), so the last one ties on hits and goes to the less loaded replica 1."""
    assert AFFINITY_LOAD_CAP == 4
    arrivals = [0.0] + [1.0 + 0.001 * i for i in range(7)]
    workload = _grouped(arrivals, [1] * 8, [2] + [300] * 7)
    assert _affinity(workload) == [0, 0, 0, 0, 0, 0, 1, 1]


class Loaded:
    """A replica as a router sees it, with a fixed number of outstanding requests."""

    def __init__(self, num_outstanding):
        self.num_outstanding = num_outstanding


def test_power_of_two_takes_the_less_loaded_of_the_pair():
    """Loads 5, 0, 9: a pair {0, 1} or {1, 2} gives replica 1 and {0, 2} gives replica 0, so the
    most loaded replica 2 is never chosen and replica 0 only for about a third of the draws; the
    draws come from the run's seeded generator."""
    replicas = [Loaded(5), Loaded(0), Loaded(9)]
    router = PowerOfTwoRouter(3, np.random.default_rng(3))
    picks = [router.route(None, replicas) for _ in range(300)]
    again = PowerOfTwoRouter(3, np.random.default_rng(3))
    assert [again.route(None, replicas) for _ in range(300)] == picks
    assert set(picks) == {0, 1} and 70 <= picks.count(0) <= 130


def test_power_of_two_in_a_run_is_seeded():
    rows = [(i * 0.01, 16, 40) for i in range(20)]
    one = routed(rows, "power_of_two", num_replicas=3, seed=7)
    assert one == routed(rows, "power_of_two", num_replicas=3, seed=7)
    assert one != routed(rows, "power_of_two", num_replicas=3, seed=8)


def test_random_routing_is_seeded():
    rows = [(i * 0.01, 16, 4) for i in range(20)]
    one = simulate(rows, seed=7, cluster={"num_replicas": 3, "global_scheduler": "random"})
    two = simulate(rows, seed=7, cluster={"num_replicas": 3, "global_scheduler": "random"})
    other = simulate(rows, seed=8, cluster={"num_replicas": 3, "global_scheduler": "random"})
    assert column(one, "replica_id") == column(two, "replica_id")
    assert column(one, "replica_id") != column(other, "replica_id")
