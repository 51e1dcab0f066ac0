"""Pipeline depth: a replica never has more than pipeline_parallel_size batches in flight (vllm_v1's
async scheduling, on one stage, queues one step behind the running one: two)."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim_core import SimulationError, parse_config, run_simulation
from sim_core.config.policies import for_policy, policy_traits
from sim_core.schedulers import SCHEDULERS
from sim_core.workload import Workload

MODEL = "codellama-34b"   # 48 layers: PP 1, 2, 3 and 4 all divide it


def in_flight_peaks(result) -> dict[int, int]:
    """Most batches of each replica between formation and the end of their last stage; a batch
    ending at t no longer counts for one formed at t."""
    peaks = {}
    for replica, batches in result.batches.groupby("replica_id"):
        times = np.concatenate((batches["formed_at"].to_numpy(), batches["completed_at"].to_numpy()))
        steps = np.concatenate((np.ones(len(batches), dtype=int), -np.ones(len(batches), dtype=int)))
        order = np.lexsort((steps, times))          # at equal times, ends (-1) before formations
        peaks[int(replica)] = int(np.cumsum(steps[order]).max())
    return peaks


def test_the_peak_counts_batches_between_formation_and_end():
    """PP=2 with four prompts at t=0 and a batch cap of 4 (two per micro-batch): two batches are
    in flight at once, never three (the third forms when the first ends)."""
    config = parse_config({"model": MODEL, "max_model_len": 256,
                           "cluster": {"pipeline_parallel_size": 2},
                           "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
                           "scheduler": {"type": "vllm", "num_blocks": 64, "batch_size_cap": 4}})
    workload = Workload(np.zeros(4), np.full(4, 10, dtype=np.int64), np.full(4, 3, dtype=np.int64), "t")
    assert in_flight_peaks(run_simulation(config, workload)) == {0: 2}


@st.composite
def scenarios(draw):
    policy = draw(st.sampled_from(sorted(SCHEDULERS)))
    pp = 1 if policy == "lightllm" else draw(st.integers(1, 4))
    block_size = 1 if policy == "lightllm" else draw(st.sampled_from([8, 16]))
    max_model_len = 256
    reserve = max_model_len // block_size
    config = {
        "model": MODEL, "max_model_len": max_model_len, "seed": draw(st.integers(0, 50)),
        "predictor": {"type": "linear", "base_s": draw(st.sampled_from([0.001, 0.004])),
                      "per_token_s": draw(st.sampled_from([0.0, 1e-4]))},
        "cluster": {"num_replicas": draw(st.integers(1, 2)), "pipeline_parallel_size": pp},
        "scheduler": for_policy({"block_size": block_size, "batch_size_cap": draw(st.integers(4, 32)),
                                 "num_blocks": reserve * 4 if policy != "lightllm" else 2000,
                                 "chunk_size": draw(st.integers(8, 64))}, policy),   # the knobs it reads
    }
    if policy_traits(policy).supports_disaggregation and draw(st.booleans()):
        config["disaggregation"] = {"enabled": True,
                                    "prefill": {"pipeline_parallel_size": draw(st.integers(1, 4))},
                                    "decode": {"pipeline_parallel_size": draw(st.integers(1, 4))}}
    n = draw(st.integers(1, 30))
    arrivals = sorted(draw(st.lists(st.floats(0, 0.5, allow_nan=False), min_size=n, max_size=n)))
    prefill = draw(st.lists(st.integers(1, 120), min_size=n, max_size=n))
    decode = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    return config, Workload(np.array(arrivals), np.array(prefill, dtype=np.int64), np.array(decode, dtype=np.int64),
                            "h")


def _depths(config) -> dict[int, int]:
    pd = config.get("disaggregation")
    if pd is None:
        depths = {r: config["cluster"]["pipeline_parallel_size"] for r in range(config["cluster"]["num_replicas"])}
    else:
        depths = {0: pd["prefill"]["pipeline_parallel_size"], 1: pd["decode"]["pipeline_parallel_size"]}
    queued = config["scheduler"]["type"] == "vllm_v1" and config["scheduler"].get("async_scheduling", True)
    return {r: depth + 1 if queued and depth == 1 else depth for r, depth in depths.items()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_replica_ever_has_more_batches_in_flight_than_pipeline_stages(case):
    """For every policy and PP 1..4 (per pool with disaggregation), from the batch records."""
    config, workload = case
    try:
        result = run_simulation(parse_config(config), workload)
    except SimulationError as error:   # LightLLM as Vidur models it cannot preempt
        assert "lightllm" in str(error)
        return
    depths = _depths(config)
    for replica, peak in in_flight_peaks(result).items():
        assert 1 <= peak <= depths[replica]
    stages = result.batch_stages
    for (_replica, _stage), runs in stages.groupby(["replica_id", "stage_id"]):
        runs = runs.sort_values("start")    # and a stage runs one batch at a time
        assert (runs["start"].to_numpy()[1:] >= runs["end"].to_numpy()[:-1]).all()
