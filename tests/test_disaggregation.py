"""P/D disaggregation: prompts on the prefill pool, the KV over a link, output on the decode pool.

Llama-2-7B keeps 2 (K, V) x 128 (head dim) x 32 KV heads x 32 layers x 2 bytes = 524,288 bytes
of KV per token. With a 100 GB/s link and 2 ms latency a 100-token prompt moves in
0.002 + 52,428,800 / 1e11 = 0.002524288 s.
"""

import pytest
from conftest import cost, simulate

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.cluster.pools import pool_views
from sim_core.memory import plan_memory
from sim_core.memory.model_bytes import kv_bytes_per_token

LINK = {"link_bandwidth_gb_s": 100.0, "link_latency_s": 0.002}
MOVE_100 = 0.002 + 100 * 524_288 / 100e9


def disaggregated(rows, prefill=None, decode=None, **overrides):
    pools = {"enabled": True, **LINK, "prefill": prefill or {}, "decode": decode or {}}
    return simulate(rows, disaggregation=pools, **overrides)


def blocks(result, replica):
    """(time, request, block ids, +1/-1) per allocation or release on a replica, in order."""
    events = result.block_events[result.block_events["replica"] == replica]
    grouped = events.groupby(["time", "request", "delta"], sort=False)["block"].apply(list)
    return [(round(t, 9), r, ids, d) for (t, r, d), ids in grouped.items()]


def test_kv_bytes_per_token_are_what_the_memory_planner_sizes():
    config = parse_config({})
    assert kv_bytes_per_token(config.model_spec(), config.kv_cache_dtype()) == 524_288
    plan = plan_memory(config.model_copy(update={"memory": config.memory.model_copy(update={"planner": "detailed"})}))
    assert plan.kv_bytes_per_block == 16 * 524_288        # one GPU holds every layer at TP 1, PP 1


def test_one_request_prefills_on_the_prefill_pool_moves_and_decodes_on_the_decode_pool(approx):
    """A 100-token prompt with 5 output tokens. Prefill replica 0 runs the prompt (0 -> 0.11 s)
    and yields the first token: TTFT 0.11 s. Decode replica 1 allocates 7 blocks at the hand-off,
    the KV moves in 0.002524288 s, then 4 decode steps of 0.011 s run there. The prefill
    replica frees its 7 blocks when the transfer ends; the gap to token 2 includes the move."""
    result = disaggregated([(0.0, 100, 5)])
    prefill_end, arrived = cost(100), cost(100) + MOVE_100
    row = result.requests.iloc[0]
    assert row["ttft"] == approx(0.11)
    assert row["e2e"] == approx(arrived + 4 * cost(1))
    assert row["replica_id"] == 1
    assert row["tbt_max"] == approx(MOVE_100 + cost(1))
    formed = [(r, round(t, 9), tuple(ids), tuple(tok)) for r, t, ids, tok in
              result.batches[["replica_id", "formed_at", "request_ids", "request_tokens"]].itertuples(index=False)]
    assert formed == [(0, 0.0, (0,), (100,))] + [(1, round(arrived + k * cost(1), 9), (0,), (1,)) for k in range(4)]
    assert blocks(result, 0) == [(0.0, 0, [0, 1, 2, 3, 4, 5, 6], 1), (round(arrived, 9), 0, [0, 1, 2, 3, 4, 5, 6], -1)]
    assert blocks(result, 1) == [(round(prefill_end, 9), 0, [0, 1, 2, 3, 4, 5, 6], 1),
                                 (round(arrived + 4 * cost(1), 9), 0, [0, 1, 2, 3, 4, 5, 6], -1)]
    transfer = result.transfers.iloc[0]
    assert (transfer["source_replica"], transfer["target_replica"], transfer["num_tokens"]) == (0, 1, 100)
    assert transfer["num_bytes"] == 52_428_800
    assert (transfer["handed_off_at"], transfer["accepted_at"], transfer["start"]) == (prefill_end,) * 3
    assert transfer["end"] - transfer["start"] == approx(MOVE_100)


def test_a_request_with_one_output_token_finishes_on_the_prefill_replica():
    result = disaggregated([(0.0, 50, 1)])
    assert result.requests["completed_at"].tolist() == [cost(50)]
    assert result.requests["replica_id"].tolist() == [0]
    assert result.transfers.empty and set(result.batches["replica_id"]) == {0}


def test_each_pool_routes_with_its_own_router():
    """Two prefill and two decode replicas, round robin both. Requests 0-3 arrive together:
    prefill replicas 0, 1, 0, 1; replica 0's batch (0, 2) ends first, so 0 and 2 are handed off
    first (in request order) to decode replicas 2 and 3, then 1 and 3 to 2 and 3."""
    result = disaggregated([(0.0, 10, 3), (0.0, 20, 3), (0.0, 30, 3), (0.0, 40, 3)],
                           prefill={"num_replicas": 2}, decode={"num_replicas": 2})
    first = result.batches[result.batches["batch_id"] == 0]
    assert dict(zip(first["replica_id"], first["request_ids"])) == {0: (0, 2), 1: (1, 3), 2: (0,), 3: (2,)}
    moves = result.transfers.sort_values("request_id")
    assert moves["source_replica"].tolist() == [0, 1, 0, 1]
    assert moves["target_replica"].tolist() == [2, 2, 3, 3]
    assert moves["handed_off_at"].tolist() == [cost(40), cost(60), cost(40), cost(60)]


def test_a_link_carries_one_transfer_at_a_time_in_request_order(approx):
    """One prefill replica runs both prompts in one batch (0 -> 0.21 s); both decode replicas
    accept at once, but the prefill replica's link moves request 0, then request 1."""
    result = disaggregated([(0.0, 100, 3), (0.0, 100, 3)], decode={"num_replicas": 2})
    moves = result.transfers.sort_values("request_id")
    end = cost(200)
    assert moves["accepted_at"].tolist() == [end, end]
    assert moves["start"].tolist()[0] == end
    assert moves["start"].tolist()[1] == moves["end"].tolist()[0] == approx(end + MOVE_100)
    assert moves["end"].tolist()[1] == approx(end + 2 * MOVE_100)


def test_a_full_decode_replica_keeps_the_hand_off_waiting_and_lor_counts_it():
    """Decode pool: 2 replicas of 10 blocks, routed by lor. Request 0 (100-token prompt, 30
    output tokens) decodes on replica 1 and grows to 8 blocks. Request 1's prompt ends at 0.31 s:
    lor ties, replica 1 is picked, but 2 free blocks cannot take its 7: it waits in the inbox and
    its prompt blocks stay on the prefill replica. Request 2's hand-off (0.42 s) goes to replica 2
    because the waiting hand-off counts for lor. Request 1 is accepted when request 0 finishes
    and its prefill blocks are freed when its transfer ends."""
    result = disaggregated([(0.0, 100, 30), (0.2, 100, 2), (0.3, 100, 2)],
                           decode={"num_replicas": 2, "global_scheduler": "lor", "num_blocks": 10})
    moves = result.transfers.set_index("request_id").sort_index()
    assert moves["target_replica"].tolist() == [1, 1, 2]
    done_0 = result.requests["completed_at"][0]
    assert done_0 == pytest.approx(cost(100) + MOVE_100 + 29 * cost(1), abs=1e-9)
    assert moves.loc[1, "handed_off_at"] == pytest.approx(0.31, abs=1e-12)
    assert moves.loc[1, "accepted_at"] == moves.loc[1, "start"] == done_0
    freed = [(t, ids) for t, r, ids, d in blocks(result, 0) if r == 1 and d == -1]
    assert freed == [(round(moves.loc[1, "end"], 9), [0, 1, 2, 3, 4, 5, 6])]   # request 0 gave them back at 0.1125 s
    assert moves.loc[2, "accepted_at"] == moves.loc[2, "handed_off_at"]


def test_round_robin_on_the_decode_pool_ignores_waiting_hand_offs():
    result = disaggregated([(0.0, 100, 30), (0.2, 100, 2), (0.3, 100, 2)],
                           decode={"num_replicas": 2, "num_blocks": 10})
    assert result.transfers.sort_values("request_id")["target_replica"].tolist() == [1, 2, 1]


def test_pool_figures_in_the_summary(approx):
    """The single-request run: the prefill stage works 0.11 s and the decode stage 4 x 0.011 s
    of the 0.156524288 s makespan; one transfer, started as soon as the prompt was done."""
    summary = disaggregated([(0.0, 100, 5)]).summary
    makespan = cost(100) + MOVE_100 + 4 * cost(1)
    assert summary["makespan_s"] == approx(makespan)
    assert summary["prefill_busy_fraction"] == approx(0.11 / makespan)
    assert summary["decode_busy_fraction"] == approx(0.044 / makespan)
    assert (summary["num_transfers"], summary["transfer_wait_p99_s"]) == (1, 0.0)
    assert summary["transfer_time_p50_s"] == approx(MOVE_100)
    assert summary["prefill_kv_utilization_peak"] == summary["decode_kv_utilization_peak"] == 0.07
    assert summary["prefill_queue_mean"] == summary["decode_queue_mean"] == 0.0


def test_each_pool_plans_its_own_memory():
    """No block counts given: the planner sizes each pool for its own TP (TP 2 halves the weights
    and the KV per GPU of each block, so the decode replicas hold far more blocks)."""
    config = parse_config({"model": "llama-2-7b", "device": "a100-80gb", "predictor": {"type": "linear"},
                           "disaggregation": {"enabled": True, "decode": {"tensor_parallel_size": 2}},
                           "workload": {"num_requests": 5}})
    result = run_simulation(config)
    prefill, decode = result.pools
    views = pool_views(config)
    assert prefill.num_blocks == plan_memory(views[0].config).num_blocks
    assert decode.num_blocks == plan_memory(views[1].config).num_blocks > 2 * prefill.num_blocks
    assert result.num_blocks == decode.num_blocks
    assert (decode.tensor_parallel_size, decode.first_replica) == (2, 1)


def test_a_prompt_the_decode_pool_can_never_hold_is_rejected_with_the_pool_named():
    result = disaggregated([(0.0, 100, 5), (0.0, 10, 5)], decode={"num_blocks": 4})
    assert result.requests["status"].tolist() == ["rejected", "finished"]
    assert result.requests["reject_reason"][0].startswith("can never be served: decode pool: its prompt needs 7")


@pytest.mark.parametrize(("changes", "message"), [
    ({"scheduler": {"type": "faster_transformer"}}, "scheduler.type faster_transformer cannot hand requests"),
    ({"disaggregation": {"enabled": True, "decode": {"pipeline_parallel_size": 3}}},
     "disaggregation.decode.pipeline_parallel_size: 3 must divide the model's 32 layers"),
    ({"disaggregation": {"enabled": True, "link_bandwidth_gb_s": 0}}, "link_bandwidth_gb_s"),
])
def test_bad_pool_settings_are_refused_naming_the_field(changes, message):
    scenario = {"disaggregation": {"enabled": True}, **changes}
    with pytest.raises(ConfigError, match=message):
        parse_config(scenario)
