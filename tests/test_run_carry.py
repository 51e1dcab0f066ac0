"""A run's member arrays carried into the replica's next run (engine/run_carry.py): the figures
derived from the last run equal what reading the requests gives, and the results are stepwise's."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from run_agreement import assert_runs_agree

import sim_core.engine.fast_forward as fast_forward
from sim_core import parse_config, run_simulation
from sim_core.engine.run_carry import Carry, carried_arrays, carry_of
from sim_core.engine.run_growth import NUMPY_MEMBERS, MemberArrays
from sim_core.entities import Batch, Request
from sim_core.workload import Workload


class Promise:
    """The two things the carry reads of a promise: paged growth, 16-token blocks."""

    growth = "paged"
    block_size = 16


def request(rid: int, prompt: int, output: int, processed: int, blocks: int) -> Request:
    r = Request(rid, float(rid), prompt, output)
    r.num_processed_tokens, r.num_blocks, r.is_prefill_complete = processed, blocks, True
    return r


def test_survivors_of_a_cut_run_and_a_newcomer():
    # Three members when the run started (their figures then, as MemberArrays.of reads them):
    #   a: 40 iterations left, 5 blocks, first growth at formation 3 (16 * 5 + 1 - 78 = 3)
    #   b: 4 left (finishes after iteration 3), 2 blocks, first growth 8 (16 * 2 + 1 - 25)
    #   c: 29 left, 3 blocks, first growth 4 (16 * 3 + 1 - 45 = 4)
    a, b, c = request(0, 70, 48, 78, 5), request(1, 20, 9, 25, 2), request(2, 40, 34, 45, 3)
    arrays = MemberArrays(np.array([40, 4, 29]), np.array([5, 2, 3]), np.array([3, 8, 4]))
    # the run applied k = 4 iterations: b finished (4 left, 4 applied), a and c survive
    carry = carry_of([a, b, c], arrays, 4, everyone=False, preemptions=7)
    assert carry is not None and carry.members == [a, c]
    # what the requests hold when the next decode batch forms: a processed 4 more tokens (82)
    # and took a block at the run's formation 3 (6 blocks); c processed 49 and takes one at
    # formation 4, the formation that forms this batch (4 blocks); newcomer d just prefilled
    # (prompt 33 in 3 blocks, 34 tokens processed with its first output token)
    a.num_processed_tokens, a.num_blocks = 82, 6
    c.num_processed_tokens, c.num_blocks = 49, 4
    d = request(3, 33, 10, 34, 3)
    left, carried = carried_arrays(carry, Promise(), Batch(9, 0, [a, c, d], [1, 1, 1]), 7)
    # a: 36 left, 6 blocks, next growth at 16 * 6 + 1 - 82 = 15; c: 25 left, 4 blocks, next at
    # 16 * 4 + 1 - 49 = 16; d read from the request: 43 - 34 = 9 left, next at 16 * 3 + 1 - 34 = 15
    assert left == [36, 25, 9]
    assert carried.left.tolist() == [36, 25, 9]
    assert carried.held.tolist() == [6, 4, 3]
    assert carried.first.tolist() == [15, 16, 15]
    fresh = MemberArrays.of(Promise(), [a, c, d], left)
    assert fresh.held.tolist() == carried.held.tolist() and fresh.first.tolist() == carried.first.tolist()


def test_a_carry_is_used_only_as_it_was_left():
    a, c = request(0, 70, 48, 78, 5), request(2, 40, 34, 44, 3)
    carry = Carry([a, c], MemberArrays(np.array([40, 30]), np.array([5, 3]), np.array([3, 5])), 4, 7)
    # a preemption since (the policy's count moved): the survivors' tokens may have been reset
    assert carried_arrays(carry, Promise(), Batch(9, 0, [a, c], [1, 1]), 8) is None
    # the batch does not start with the survivors in their order
    assert carried_arrays(carry, Promise(), Batch(9, 0, [c, a], [1, 1]), 7) is None
    assert carried_arrays(carry, Promise(), Batch(9, 0, [a], [1]), 7) is None
    # nobody survives: no carry
    assert carry_of([a], MemberArrays(np.array([4]), np.array([5]), np.array([3])), 4, False, 7) is None


def checked_carries(monkeypatch) -> list[int]:
    """Wrap the engine's `carried_arrays`: every carry used must equal reading the requests.
    Returns a list whose length counts the carries used. Runs of NUMPY_MEMBERS (8) members or
    more carry theirs here (the engine waits for CARRY_MEMBERS, a cost choice only), so that
    small scenarios carry often."""
    used: list[int] = []
    monkeypatch.setattr(fast_forward, "CARRY_MEMBERS", NUMPY_MEMBERS)

    def checked(carry, promise, batch, preemptions):
        out = carried_arrays(carry, promise, batch, preemptions)
        if out is not None:
            requests = batch.requests
            left = [r.num_prefill_tokens + r.num_decode_tokens - r.num_processed_tokens for r in requests]
            fresh = MemberArrays.of(promise, requests, left)
            assert out[0] == left
            for name in ("left", "held", "first"):
                assert getattr(out[1], name).tolist() == getattr(fresh, name).tolist(), name
            used.append(len(requests))
        return out

    monkeypatch.setattr(fast_forward, "carried_arrays", checked)
    return used


def dense(n: int, seed: int, prompt_max: int = 200, output_max: int = 120) -> Workload:
    rng = np.random.default_rng(seed)
    return Workload(np.sort(rng.uniform(0, n / 40, n)), rng.integers(8, prompt_max, n).astype(np.int64),
                    rng.integers(2, output_max, n).astype(np.int64), "carry")


def config(policy: str, router: str, replicas: int, blocks: int, block_size: int, cap: int) -> dict:
    return {"seed": 1, "max_model_len": 512, "model": "llama-2-7b", "device": "a100-80gb",
            "predictor": {"type": "linear", "base_s": 0.005, "per_token_s": 0.0001},
            "cluster": {"num_replicas": replicas, "global_scheduler": router},
            "scheduler": {"type": policy, "block_size": block_size, "num_blocks": blocks, "batch_size_cap": cap,
                          **({"chunk_size": 64} if policy == "sarathi" else {})}}


def test_carries_are_used_on_a_busy_replica_and_equal_fresh_reads(monkeypatch):
    # 400 requests at 40 a second on one vllm replica: runs of a dozen members and more, each cut by an
    # arrival whose prompt runs alone, then the survivors and the newcomer decode again
    used = checked_carries(monkeypatch)
    scenario = config("vllm", "round_robin", 1, 4000, 16, 128)
    run_simulation(parse_config({**scenario, "engine": {"record": "requests"}}), dense(400, 0))
    assert len(used) > 50 and max(used) >= 16, (len(used), max(used))


USED: list[list[int]] = []   # the carries each example used (to see how often they are)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(policy=st.sampled_from(["vllm", "sarathi"]), router=st.sampled_from(["round_robin", "lor"]),
       replicas=st.integers(1, 3), blocks=st.integers(40, 600), block_size=st.sampled_from([4, 8, 16]),
       cap=st.integers(8, 64), n=st.integers(20, 120), seed=st.integers(0, 1000))
def test_carried_arrays_equal_fresh_reads_and_results_stepwise(monkeypatch, policy, router, replicas, blocks,
                                                               block_size, cap, n, seed):
    # short KV pools make restarts: a carry must not outlive one
    USED.append(checked_carries(monkeypatch))
    assert_runs_agree(config(policy, router, replicas, blocks, block_size, cap), dense(n, seed),
                      skip_when_stepwise_fails=True)
