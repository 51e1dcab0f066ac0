"""Memory breakdown: per-stage bytes that add up to the device, and the KV capacity they leave."""

import pytest

from sim_core import parse_config
from sim_core.memory import memory_breakdown, plan_memory
from sim_core.memory.model_bytes import stage_weight_bytes
from sim_core.memory.planner import GIB


def test_detailed_breakdown_puts_embedding_and_lm_head_on_their_stages_and_sums_to_the_device():
    config = parse_config({"max_model_len": 2048, "memory": {"planner": "detailed", "framework_reserve_gib": 2.0},
                           "cluster": {"pipeline_parallel_size": 2}})
    breakdown = memory_breakdown(config)
    first, last = breakdown.stages
    model = config.model_spec()
    assert first.weights == stage_weight_bytes(model, 1, 2, 0)
    assert last.weights - first.weights == 2 * model.embedding_dim  # the final norm; both hold a vocab x dim matrix
    assert first.reserve == 2 * GIB
    for stage in breakdown.stages:
        parts = stage.weights + stage.activations + stage.reserve + stage.margin + stage.kv_cache + stage.unused
        assert parts == pytest.approx(80 * GIB, rel=1e-12)
    plan = plan_memory(config)
    assert breakdown.kv_token_capacity == plan.num_blocks * 16
    assert breakdown.max_batch_size == plan.num_blocks // 128


def test_vidur_breakdown_shows_its_kv_for_max_batch_full_length_requests():
    config = parse_config({"max_model_len": 2048})
    breakdown = memory_breakdown(config)
    assert breakdown.planner == "vidur" and breakdown.max_batch_size == 59
    assert breakdown.stages[0].kv_cache == 59 * 2048 * 2 * 2 * 4096 * 32
    assert breakdown.frame()["component"].tolist() == ["weights", "activations", "reserve", "margin", "kv_cache",
                                                       "unused"]
