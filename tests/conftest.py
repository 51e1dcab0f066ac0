"""Shared helpers: small hand-made workloads and scenarios with round-number costs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# AppTests must see a page's exception itself, not the one-line error a visitor gets
# (tests/test_web_security.py turns this off to check that line).
os.environ["SIM_EXPLORER_PROPAGATE_ERRORS"] = "1"

from sim_core import parse_config, run_simulation  # noqa: E402
from sim_core.config.policies import for_policy  # noqa: E402
from sim_core.workload import Workload  # noqa: E402

BASE_S, PER_TOKEN_S = 0.01, 0.001


def workload(*rows) -> Workload:
    """rows: (arrived_at, num_prefill_tokens, num_decode_tokens) in arrival order."""
    arrived, prefill, decode = zip(*rows)
    return Workload(np.array(arrived, dtype=float), np.array(prefill, dtype=np.int64),
                    np.array(decode, dtype=np.int64), "test")


def scenario(policy: str = "vllm", **overrides) -> dict:
    """A scenario dict: linear cost 10 ms + 1 ms per token, explicit KV blocks, no watermark
    (for the policies that keep one)."""
    base = {
        "max_model_len": 2048,
        "predictor": {"type": "linear", "base_s": BASE_S, "per_token_s": PER_TOKEN_S},
        "scheduler": for_policy({"num_blocks": 100, "block_size": 16, "watermark_blocks_fraction": 0.0}, policy),
        "cluster": {"num_replicas": 1},
        "engine": {"record": "full"},
    }
    for section, values in overrides.items():
        if isinstance(values, dict):
            base.setdefault(section, {}).update(values)
        else:
            base[section] = values
    return base


def simulate(rows, policy="vllm", **overrides):
    """Run a hand-made workload under `policy`; overrides update scenario sections."""
    return run_simulation(parse_config(scenario(policy, **overrides)), workload(*rows))


def cost(tokens: int) -> float:
    """Stage time of an iteration processing `tokens` tokens (computed as the simulator does)."""
    return BASE_S + PER_TOKEN_S * tokens


def batches_of(result, replica: int = 0) -> list[tuple]:
    """(formed_at, request ids, tokens) per batch of a replica, in formation order."""
    rows = result.batches[result.batches["replica_id"] == replica]
    return [(round(t, 9), list(ids), list(tok)) for t, ids, tok in
            zip(rows["formed_at"], rows["request_ids"], rows["request_tokens"])]


def column(result, name: str) -> list:
    return result.requests[name].tolist()


@pytest.fixture
def approx():
    return lambda value: pytest.approx(value, abs=1e-9)
