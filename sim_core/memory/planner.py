"""Memory planners: how many KV-cache blocks fit on a replica's GPUs, and how many requests.

Three named planners (pure arithmetic, bytes throughout):

* `vidur` reproduces Vidur's MemoryPlanner: parameters of the transformer blocks only (no
  embeddings or LM head), KV for `max_model_len` tokens per request counted over *all* layers
  even with pipeline parallelism (Vidur's conservative quirk), then
  `num_blocks = (max_model_len // block_size) * max_batch_size * PP`.
* `detailed` also counts the embedding and LM head (on the first and last stage), norms and
  MoE experts, reserves activation memory for the largest iteration the scheduler can form,
  and sizes blocks by the layers each stage actually holds; the tightest stage decides.
* `vllm` (`vllm_plan.py`) gives what vLLM's start-up memory profiling leaves for the KV cache:
  `gpu_memory_utilization` of the device, less the weights, the profile run's peak activations
  (`max_num_batched_tokens` through the layers; the sampler on `max_num_seqs` rows of logits)
  and the memory outside PyTorch; within 2% of the block counts vLLM reported on public runs.

`auto` runs the policy's planner (`PolicyTraits.memory_planner`): vidur for the five policies
Vidur models, vllm for vllm_v1 and vllm_v0, detailed for sglang.
"""

from __future__ import annotations

from math import ceil

from sim_core.catalog import DeviceSpec, ModelSpec
from sim_core.config import SimulationConfig
from sim_core.config.memory import MarginMemoryConfig, ReservingMemoryConfig
from sim_core.errors import ConfigError
from sim_core.memory.model_bytes import kv_bytes_per_token, stage_weight_bytes
from sim_core.memory.plan import GIB, MemoryPlan
from sim_core.memory.vllm_plan import vllm_plan

BYTES_PER_VALUE = 2  # Vidur's planner: fp16 / bf16 weights


def plan_memory(config: SimulationConfig) -> MemoryPlan:
    """Run the configured planner (`auto` picks the policy's: `vidur` for the policies Vidur models).

    Raises:
        ConfigError: the model's weights leave no room for even one request's KV cache.
    """
    name = config.memory.planner
    if name == "auto":
        name = config.scheduler.traits.memory_planner
    plan = PLANS[name](config)
    if plan.max_batch_size < 1 or plan.num_blocks < 1:
        raise ConfigError(
            f"memory: {config.model} on {config.device} (TP={config.cluster.tensor_parallel_size}, "
            f"PP={config.cluster.pipeline_parallel_size}) leaves no room for one request of "
            f"max_model_len={config.max_model_len} tokens ({plan.planner} planner: "
            f"{plan.weight_bytes / GIB:.1f} GiB weights + {plan.activation_bytes / GIB:.1f} GiB activations + "
            f"{_framework_bytes(plan) / GIB:.1f} GiB framework reserve of "
            f"{(plan.device_bytes - plan.margin_bytes) / GIB:.1f} GiB usable per GPU); use more GPUs, "
            "a bigger device or a shorter max_model_len")
    return plan


def vidur_plan(config: SimulationConfig) -> MemoryPlan:
    assert isinstance(config.memory, MarginMemoryConfig), "the vidur plan runs for planner auto or vidur"
    model, device, tp, pp = _shape(config)
    total = device.memory_gib * GIB
    available = total * (1 - config.memory.margin_fraction)
    kv_heads = ceil(model.num_kv_heads / tp)
    per_layer = (model.embedding_dim * model.head_dim * (model.num_q_heads // tp + 2 * kv_heads)
                 + model.embedding_dim * model.head_dim * (model.num_q_heads // tp)
                 + (3 if model.use_gated_mlp else 2) * model.embedding_dim * model.mlp_hidden_dim // tp)
    weights = BYTES_PER_VALUE * per_layer * (model.num_layers // pp)
    kv_per_request = config.max_model_len * kv_bytes_per_token(model, "bf16", tp)   # Vidur: 16-bit, every layer
    max_batch = int((available - weights) // kv_per_request)
    per_request_blocks = config.max_model_len // config.scheduler.block_size
    num_blocks = per_request_blocks * max_batch * pp
    kv_per_block = kv_per_request / max(per_request_blocks, 1)
    return MemoryPlan("vidur", total, total - available, weights, 0.0, available - weights,
                      kv_per_block, num_blocks, max_batch, per_request_blocks)


def detailed_plan(config: SimulationConfig) -> MemoryPlan:
    memory = config.memory
    assert isinstance(memory, ReservingMemoryConfig), "the detailed plan runs for planner auto or detailed"
    model, device, tp, pp = _shape(config)
    total = device.memory_gib * GIB
    margin = total * memory.margin_fraction
    layers = model.num_layers // pp
    kv_per_block = config.scheduler.block_size * kv_bytes_per_token(model, config.kv_cache_dtype(), tp, layers)
    activations = activation_bytes(config, model, tp)
    weights = max(stage_weight_bytes(model, tp, pp, stage, config.moe_layout()) for stage in range(pp))
    reserve = memory.framework_reserve_gib * GIB
    kv_bytes = total - margin - reserve - weights - activations
    num_blocks = int(kv_bytes // kv_per_block) if kv_bytes > 0 else 0
    per_request_blocks = config.max_model_len // config.scheduler.block_size
    return MemoryPlan("detailed", total, margin, weights, activations, kv_bytes, kv_per_block,
                      num_blocks, num_blocks // max(per_request_blocks, 1), per_request_blocks, reserve)


def activation_bytes(config: SimulationConfig, model: ModelSpec, tp: int) -> float:
    """Peak activation memory of the largest iteration the scheduler can form (one GPU)."""
    sched = config.scheduler
    tokens = sched.activation_tokens(config.max_model_len)
    e, hd = model.embedding_dim, model.head_dim
    per_token = (4 * e + hd * (model.num_q_heads + 2 * model.num_kv_heads) / tp
                 + 3 * model.mlp_hidden_dim * model.num_experts_per_token / tp)
    logits = min(sched.batch_size_cap, tokens) * model.vocab_size / tp * 4  # fp32 logits
    return tokens * per_token * BYTES_PER_VALUE + logits


def _shape(config: SimulationConfig) -> tuple[ModelSpec, DeviceSpec, int, int]:
    return (config.model_spec(), config.device_spec(), config.cluster.tensor_parallel_size,
            config.cluster.pipeline_parallel_size)


def _framework_bytes(plan: MemoryPlan) -> float:
    """What the serving framework takes besides weights, activations and KV."""
    return plan.reserve_bytes + plan.non_torch_bytes + plan.cuda_graph_bytes


PLANS = {"vidur": vidur_plan, "detailed": detailed_plan, "vllm": vllm_plan}
