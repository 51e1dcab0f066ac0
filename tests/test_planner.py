"""Memory planners: Vidur's formula reproduced, and the detailed planner's accounting."""

import pytest

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.memory import detailed_plan, plan_memory, vidur_plan


@pytest.mark.parametrize("pp,batch,blocks", [(1, 59, 59 * 128), (2, 65, 65 * 2 * 128)])
def test_vidur_planner_matches_vidur_for_llama2_7b_on_a100_80gb(pp, batch, blocks):
    config = parse_config({"max_model_len": 2048, "cluster": {"pipeline_parallel_size": pp}})
    plan = vidur_plan(config)
    assert (plan.max_batch_size, plan.num_blocks) == (batch, blocks)


def test_auto_uses_vidur_for_vidur_schedulers():
    config = parse_config({"max_model_len": 2048})
    assert plan_memory(config).planner == "vidur"


def test_detailed_planner_counts_embeddings_activations_and_the_tightest_stage():
    config = parse_config({"max_model_len": 2048, "memory": {"planner": "detailed"}})
    plan = detailed_plan(config)
    per_block = 2 * 16 * 128 * 32 * 32 * 2          # K and V, 16 tokens, 32 heads x 128, 32 layers, bf16
    assert plan.kv_bytes_per_block == per_block
    assert plan.weight_bytes > vidur_plan(config).weight_bytes  # embeddings and LM head included
    assert plan.activation_bytes > 0
    assert plan.reserve_bytes == 1024**3  # framework reserve: 1 GiB by default
    usable = plan.device_bytes - plan.margin_bytes - plan.reserve_bytes - plan.weight_bytes - plan.activation_bytes
    assert plan.num_blocks == int(usable // per_block)
    assert plan.max_batch_size == plan.num_blocks // 128


def test_a_model_that_does_not_fit_is_a_clear_config_error():
    config = parse_config({"model": "llama-2-70b", "device": "rtx-4090", "predictor": {"type": "linear"},
                           "workload": {"num_requests": 2}})
    with pytest.raises(ConfigError, match="llama-2-70b on rtx-4090 .* leaves no room for one request"):
        run_simulation(config)


def test_explicit_num_blocks_overrides_the_planner():
    config = parse_config({"scheduler": {"num_blocks": 77}, "predictor": {"type": "linear"},
                           "workload": {"num_requests": 3}})
    assert run_simulation(config).num_blocks == 77


def test_detailed_planner_sizes_pipeline_stages_by_the_heaviest_one():
    """With PP=2 the first stage holds the embedding and the last the LM head: the heavier one
    decides, and each block only needs the KV of one stage's layers."""
    config = parse_config({"max_model_len": 2048, "memory": {"planner": "detailed"},
                           "cluster": {"pipeline_parallel_size": 2}})
    plan = detailed_plan(config)
    one_stage = detailed_plan(parse_config({"max_model_len": 2048, "memory": {"planner": "detailed"}}))
    assert plan.kv_bytes_per_block * 2 == one_stage.kv_bytes_per_block
    assert one_stage.weight_bytes / 2 < plan.weight_bytes < one_stage.weight_bytes
    assert plan.num_blocks > one_stage.num_blocks


def test_moe_weights_count_every_expert():
    dense = detailed_plan(parse_config({"model": "mistral-7b", "memory": {"planner": "detailed"}}))
    moe = detailed_plan(parse_config({"model": "mixtral-8x7b", "device": "h200", "memory": {"planner": "detailed"}}))
    assert moe.weight_bytes > 5 * dense.weight_bytes  # 8 experts share attention, not MLPs
