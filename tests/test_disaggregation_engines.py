"""P/D disaggregation with the engine schedulers (vllm_v0, vllm_v1, sglang): each takes a hand-off
over as its engine's decode instance does.

Costs as in conftest: an iteration takes 10 ms + 1 ms per token. Llama-2-7B moves 524,288 bytes
of KV per token; the link here is 100 GB/s with 2 ms latency.
"""

import numpy as np
import pytest
from conftest import batches_of, scenario

from sim_core import parse_config, run_simulation
from sim_core.workload import Workload

LINK = {"link_bandwidth_gb_s": 100.0, "link_latency_s": 0.002}
KV_PER_TOKEN = 524_288


def run(policy, rows, scheduler=None, decode=None, **columns):
    """rows: (arrived_at, prompt, outputs); columns: optional workload columns (prefix_len, n...)."""
    arrived, prompt, outputs = zip(*rows)
    work = Workload(np.array(arrived, float), np.array(prompt, dtype=np.int64), np.array(outputs, dtype=np.int64),
                    "test", **{name: np.array(values, dtype=np.int64) for name, values in columns.items()})
    pools = {"enabled": True, **LINK, "prefill": {}, "decode": decode or {}}
    return run_simulation(parse_config(scenario(policy, scheduler=scheduler or {}, disaggregation=pools)), work)


def moves(result) -> list[tuple]:
    """(request, tokens moved, handed off at, accepted at) per transfer, by request."""
    rows = result.transfers.sort_values("request_id")
    return [(r, n, round(h, 9), round(a, 9)) for r, n, h, a in
            rows[["request_id", "num_tokens", "handed_off_at", "accepted_at"]].itertuples(index=False)]


def test_a_vllm_v1_decode_replica_pulls_only_the_blocks_its_prefix_cache_lacks():
    """Two requests share a 32-token system prompt (prefix group 0). Request 0 (prompt 32)
    prefills at 0 s and its two blocks move whole (32 tokens). Its blocks stay cached on both
    replicas after it finishes. Request 1 (prompt 48) arrives at 1 s: the prefill replica hits
    the two blocks and computes 16 tokens; the decode replica hits them too, so only the third
    block moves: 16 tokens, 0.002 + 16 x 524,288 / 1e11 s."""
    result = run("vllm_v1", [(0.0, 32, 3), (1.0, 48, 3)], {"enable_prefix_caching": True},
                 prefix_group=[0, 0], prefix_len=[32, 32])
    assert batches_of(result, 0) == [(0.0, [0], [32]), (1.0, [1], [16])]
    assert moves(result) == [(0, 32, 0.042, 0.042), (1, 16, 1.026, 1.026)]
    transfer = result.transfers.set_index("request_id").loc[1]
    assert transfer["num_bytes"] == 16 * KV_PER_TOKEN
    assert transfer["end"] - transfer["start"] == pytest.approx(0.002 + 16 * KV_PER_TOKEN / 100e9, abs=1e-12)
    decode = result.block_events[(result.block_events["replica"] == 1) & (result.block_events["request"] == 1)]
    # hits 0, 1 + one new block: 2, request 0's last block, never keyed, so freed to the queue's front
    assert decode[decode["delta"] == 1]["block"].tolist()[:3] == [0, 1, 2]


def test_a_vllm_v1_decode_replica_keys_a_landed_prompt_at_its_next_formation():
    """vLLM caches a received prompt's blocks in the first schedule() after its KV arrived, not
    when the transfer ends. Serial steps. Request 0 (prompt 4, 30 outputs) prefills at 0 s (14
    ms), moves 4 tokens (0.002 + 4 x 524,288 / 1e11 s) and decodes on replica 1 from
    0.016020972 s, one 11 ms iteration after another. Request 1 (prompt 16) prefills at 0.02 s
    (26 ms) and is handed off at 0.046 s; replica 1 accepts it at its next formation,
    0.049020972 s (one new block, 1; no hits), and its 16 tokens land at 0.049020972 + 0.002 +
    16 x 524,288 / 1e11 = 0.051104858 s, mid-iteration. Block 1 gets its key at the formation
    that iteration's end brings, 0.060020972 s, which also runs request 1's first decode and
    gives it block 2 for its 17th token."""
    result = run("vllm_v1", [(0.0, 4, 30), (0.02, 16, 3)], {"enable_prefix_caching": True, "async_scheduling": False},
                 prefix_group=[1, 0], prefix_len=[0, 0])
    assert moves(result) == [(0, 4, 0.014, 0.014), (1, 16, 0.046, 0.049020972)]
    assert result.transfers["end"].round(9).tolist() == [0.016020972, 0.051104858]
    assert batches_of(result, 1)[3:5] == [(0.049020972, [0], [1]), (0.060020972, [0, 1], [1, 1])]
    events = result.block_events[(result.block_events["replica"] == 1) & (result.block_events["time"] < 0.07)]
    rows = events[["time", "request", "block", "delta"]].itertuples(index=False)
    assert [(round(t, 9), r, b, d) for t, r, b, d in rows] == [
        (0.014, 0, 0, 1), (0.049020972, 1, 1, 1), (0.060020972, -1, 1, 2), (0.060020972, 1, 2, 1)]


@pytest.mark.parametrize("policy, knob", [("vllm_v0", {"max_num_seqs": 1}), ("vllm_v1", {"max_num_seqs": 1}),
                                          ("sglang", {"max_running_requests": 1})])
def test_a_decode_replica_at_its_request_cap_keeps_the_hand_off_in_its_inbox(policy, knob):
    """One request slot on the decode replica. Request 0 (prompt 100, 30 outputs) is handed off
    at 0.11 s and decodes there; request 1 is handed off at 0.31 s but waits in the inbox until
    request 0 finishes (0.11 + 0.002524288 + 29 x 0.011 s), and is accepted at that instant."""
    result = run(policy, [(0.0, 100, 30), (0.2, 100, 2)], knob)
    done_0 = 0.11 + 0.002 + 100 * KV_PER_TOKEN / 100e9 + 29 * 0.011
    assert result.requests["completed_at"][0] == pytest.approx(done_0, abs=1e-9)
    assert moves(result) == [(0, 100, 0.11, 0.11), (1, 100, 0.31, round(result.requests["completed_at"][0], 9))]


def test_an_sglang_decode_replica_keeps_a_decode_reserve_per_request():
    """Decode replica of 10 blocks (160 tokens), prompts of 64 tokens with 90 outputs. Request 0
    is pre-allocated at its hand-off (64 + min(512, 89 outputs left) = 153 <= 160). Request 1's
    hand-off at 0.174 s finds 5 free blocks, enough for its prompt, but not for its prompt, its
    reserve and request 0's reserve: it waits until request 0 finishes. vllm_v1, which only
    needs the prompt's blocks, takes it at the end of the decode step in flight (the 9th after
    request 0's KV arrived at 0.076335544 s). The decode replica runs a chunk cache: prefix keys
    only ever appear on the prefill replica."""
    rows, decode = [(0.0, 64, 90), (0.1, 64, 90)], {"num_blocks": 10}
    result = run("sglang", rows, {"enable_prefix_caching": True}, decode)
    done_0 = round(result.requests["completed_at"][0], 9)
    assert moves(result) == [(0, 64, 0.074, 0.074), (1, 64, 0.174, done_0)]
    assert done_0 > 1.0
    keyed = result.block_events[result.block_events["delta"].abs() == 2]
    assert set(keyed["replica"]) == {0}
    arrived_0 = 0.074 + 0.002 + 64 * KV_PER_TOKEN / 100e9
    assert moves(run("vllm_v1", rows, {}, decode))[1] == (1, 64, 0.174, round(arrived_0 + 9 * 0.011, 9))


def test_a_vllm_v0_group_moves_its_prompt_once_and_forks_on_the_decode_replica():
    """A request for n = 2 samples with a 20-token prompt (2 blocks). The prefill replica runs the
    prompt as one sequence and hands it over unforked (no reference counts there); 20 tokens
    move. The decode replica allocates the 2 blocks, forks them to both sequences (references
    2), and the first decode step copies the shared, partly filled last block for sequence 0
    (copy-on-write: one block copied, charged to that batch)."""
    result = run("vllm_v0", [(0.0, 20, 3)], n=[2])
    assert moves(result) == [(0, 20, 0.03, 0.03)]
    arrived = 0.03 + 0.002 + 20 * KV_PER_TOKEN / 100e9
    assert batches_of(result, 0) == [(0.0, [0], [20])]
    assert [tokens for _, _, tokens in batches_of(result, 1)] == [[2], [2]]
    assert set(result.block_refs["replica"]) == {1}
    first = result.block_refs[result.block_refs["time"] == result.block_refs["time"].min()]
    assert first[["block", "refs"]].values.tolist() == [[0, 2], [1, 2], [1, 1]]
    assert first["time"].iloc[0] == pytest.approx(arrived, abs=1e-9)
    ops = result.cache_ops
    assert ops[["replica_id", "kind", "num_blocks"]].values.tolist() == [[1, "copy", 1]]
    decode = result.block_events[result.block_events["replica"] == 1]
    assert decode[decode["delta"] == 1]["block"].tolist() == [0, 1, 2]   # the prompt's 2, then the copy


def test_a_vllm_v0_decode_pool_that_can_never_admit_a_prompt_rejects_it_up_front():
    result = run("vllm_v0", [(0.0, 100, 3), (0.0, 10, 3)], decode={"num_blocks": 5})
    reasons = result.requests["reject_reason"].tolist()
    assert reasons[0] == ("can never be served: decode pool: its prompt needs 7 KV blocks but a decode "
                          "replica admits at most 5 (5 blocks minus a watermark of 0)")
    assert result.requests["status"].tolist() == ["rejected", "finished"]


def test_an_sglang_hand_off_cut_to_the_output_it_has_finishes_at_its_prefill():
    """The decode replica has 4 blocks (64 tokens): SGLang's request limit there is 63 tokens, so
    request 0 (prompt 62, 5 outputs) may have one output, which its prefill (0 to 0.082 s,
    batched with request 1) already yielded. At its hand-off it is cut to that token and is done
    at 0.082 s: no transfer, its 4 prefill blocks freed then. It used to join the inbox, decode
    past its cut end and outgrow the decode pool (radix pool: "eviction did not free enough
    blocks"). Request 1 moves as usual."""
    result = run("sglang", [(0.0, 62, 5), (0.0, 10, 3)], decode={"num_blocks": 4})
    requests = result.requests
    assert requests["status"].tolist() == ["finished", "finished"]
    assert requests["num_decode_tokens"].tolist() == [1, 3]
    assert requests["truncated"].tolist() == [True, False]
    assert requests.loc[0, ["prefill_completed_at", "completed_at"]].tolist() == pytest.approx([0.082, 0.082])
    assert moves(result) == [(1, 10, 0.082, 0.082)]
    assert batches_of(result, 0) == [(0.0, [0, 1], [62, 10])]
    assert [requests for _, requests, _ in batches_of(result, 1)] == [[1], [1]]
    held = result.block_events[result.block_events["request"] == 0]
    assert held[["time", "replica", "block", "delta"]].values.tolist() == (
        [[0.0, 0, block, 1] for block in range(4)] + [[0.082, 0, block, -1] for block in range(4)])
