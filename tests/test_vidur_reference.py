"""Every request's times match Vidur's own outputs on the reference trace (to 1e-6 s)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sim_core import parse_config, run_simulation

DATA = Path(__file__).parent / "data" / "vidur_reference"


def _cases() -> list[tuple[str, dict]]:
    cases = []
    for line in (DATA / "cases.txt").read_text().splitlines():
        name, options = line.split(":", 1)
        words = options.split()
        cases.append((name, dict(zip((w.lstrip("-").replace("-", "_") for w in words[::2]), words[1::2]))))
    return cases


def _scenario(options: dict) -> dict:
    return {
        "max_model_len": 1024, "model": "llama-2-7b", "device": "a100-80gb",
        "predictor": {"type": "linear", "base_s": 0.005, "per_token_s": 0.0001},
        "memory": {"planner": "vidur"},
        "cluster": {"num_replicas": int(options.get("num_replicas", 1)),
                    "pipeline_parallel_size": int(options.get("pp", 1)),
                    "global_scheduler": options.get("global_scheduler", "round_robin")},
        "scheduler": {"type": options["scheduler"], "num_blocks": int(options["num_blocks"]),
                      "block_size": int(options.get("block_size", 16)),
                      "chunk_size": int(options.get("chunk_size", 512))},
        "workload": {"trace_file": str(DATA / "trace.csv")},
    }


@pytest.mark.parametrize("fast_forward", [True, False], ids=["fast", "stepwise"])
@pytest.mark.parametrize("name,options", _cases(), ids=[c[0] for c in _cases()])
def test_matches_vidur(name, options, fast_forward):
    scenario = _scenario(options)
    scenario["engine"] = {"fast_forward": fast_forward}
    ours = run_simulation(parse_config(scenario)).requests
    vidur = pd.read_csv(DATA / f"{name}.csv")
    assert ours["replica_id"].tolist() == vidur["replica_id"].tolist()
    assert ours["num_restarts"].tolist() == vidur["num_restarts"].tolist()
    for column in ("scheduled_at", "prefill_completed_at", "completed_at"):
        assert np.max(np.abs(ours[column].to_numpy() - vidur[column].to_numpy())) <= 1e-6, column


def test_reference_includes_preemptions_and_pipelines():
    """The reference is not trivial: restarts happen and PP=2 / two replicas are covered."""
    restarts = pd.read_csv(DATA / "vllm.csv")["num_restarts"].sum()
    assert restarts > 0
    assert {"vllm_pp2_r2_lor", "sarathi_pp2_r2_rr"} <= {name for name, _ in _cases()}
