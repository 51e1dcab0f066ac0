"""vLLM's KV budget: what its worker's memory profiling leaves for the KV cache (the `vllm` planner).

vLLM sizes the KV cache once, at start-up (`v1/worker/gpu_worker.py` `determine_available_memory`
with `utils/mem_utils.py` `memory_profiling`; the V0 worker of v0.6 the same way). Per GPU:

    requested  = ceil(total x gpu_memory_utilization)        total: what the driver reports
    kv_bytes   = requested - weights - rotary cache - peak activations of the profile run
                 - non-torch increase
                 [- CUDA-graph estimate: v0.21+, on by default; not in 0.15 or 0.19]
    num_blocks = kv_bytes // (block_size x KV bytes per token of the GPU's layers)

and the replica gets the smallest count over its GPUs. The rotary embedding's cos/sin cache is
allocated with the weights: max_position_embeddings x rotary dims x 2 bytes on every GPU (32 MiB
for a 131,072-position model; 2.5 GiB for Llama-4's 10,485,760 positions). The CUDA context is created before the
baseline snapshot, so it comes out of the (1 - gpu_memory_utilization) headroom, not the budget.

The profile run is one dummy step of `max_num_batched_tokens` tokens over at most `max_num_seqs`
requests, then (last pipeline stage) the sampler on one row of logits per request. Its peak is
the larger of the forward pass's live tensors (residual, hidden, QKV and the gated MLP's
up-projection and activation, per token) and the sampler's (fp32 logits and the copies top-k/top-p
sorting makes, per request x vocab entry, while the step's hidden states are still held). The
per-logit and per-hidden bytes and the non-torch defaults are fitted on public vLLM 0.15.1 H100
runs (inference-sim/inference-sim testdata, Apache-2.0) and one vLLM 0.19 RTX 4090 run
(casys-kaist/LLMServingSim, MIT): docs/design/vllm-memory-planner.md has the table.
"""

from __future__ import annotations

from math import ceil

from sim_core.catalog import ModelSpec
from sim_core.config import SimulationConfig
from sim_core.config.memory import VllmKnobs
from sim_core.memory.model_bytes import kv_bytes_per_token, stage_weight_bytes
from sim_core.memory.plan import GIB, MemoryPlan

ACTIVATION_BYTES = 2            # forward activations: 16-bit
SAMPLER_BYTES_PER_LOGIT = 32    # sampler peak per request x vocab entry (fp32 logits and sorting copies)
HIDDEN_BYTES_KEPT = 4           # per token x hidden unit held through the sampler run
NON_TORCH_GIB_ONE_GPU = 0.2     # non-torch increase of a lone GPU
NON_TORCH_GIB_SHARDED = 0.7     # ... with TP or PP > 1 (NCCL and custom all-reduce buffers)


def vllm_plan(config: SimulationConfig) -> MemoryPlan:
    """vLLM's KV budget for the scenario's replica (the tightest pipeline stage decides).

    Reads memory.gpu_memory_utilization, non_torch_gib and cuda_graph_gib, and the scheduler's
    profile batch (`SchedulerConfig.profile_batch`)."""
    memory = config.memory
    assert isinstance(memory, VllmKnobs), "the vllm plan runs for planner auto or vllm"
    model, tp, pp = config.model_spec(), config.cluster.tensor_parallel_size, config.cluster.pipeline_parallel_size
    device = config.device_spec()
    total = (device.driver_memory_gib or device.memory_gib) * GIB   # what vLLM's utilization multiplies
    requested = ceil(total * memory.gpu_memory_utilization)
    non_torch = non_torch_bytes(memory, tp * pp * config.cluster.data_parallel_size)
    graphs = memory.cuda_graph_gib * GIB
    tokens, seqs = config.scheduler.profile_batch(config.max_model_len)
    kv_per_block = config.scheduler.block_size * kv_bytes_per_token(
        model, config.kv_cache_dtype(), tp, model.num_layers // pp)
    activations = tuple(profile_activation_bytes(model, tp, tokens, seqs if stage == pp - 1 else 0)
                        for stage in range(pp))
    rotary = rotary_cache_bytes(model)
    layout = config.moe_layout()
    kv_by_stage = [requested - stage_weight_bytes(model, tp, pp, stage, layout) - rotary - activations[stage]
                   - non_torch - graphs for stage in range(pp)]
    tight = min(range(pp), key=lambda stage: kv_by_stage[stage])
    kv_bytes = kv_by_stage[tight]
    num_blocks = int(kv_bytes // kv_per_block) if kv_bytes > 0 else 0
    per_request = config.max_model_len // config.scheduler.block_size
    return MemoryPlan("vllm", total, total - requested, stage_weight_bytes(model, tp, pp, tight, layout) + rotary,
                      activations[tight],
                      kv_bytes, kv_per_block, num_blocks, num_blocks // max(per_request, 1), per_request,
                      non_torch_bytes=non_torch, cuda_graph_bytes=graphs, stage_activation_bytes=activations)


def rotary_cache_bytes(model: ModelSpec) -> float:
    """The rotary embedding's cos/sin table, 16-bit, one row per position (MLA: its rope dims)."""
    dims = model.qk_rope_head_dim if model.is_mla else model.head_dim
    return model.max_position_embeddings * dims * ACTIVATION_BYTES


def profile_activation_bytes(model: ModelSpec, tp: int, tokens: int, seqs: int) -> float:
    """Peak activation bytes of vLLM's profile run on one GPU: `tokens` through the layers, then
    (seqs > 0: the last pipeline stage) the sampler on `seqs` rows of logits; the larger wins."""
    e, hd = model.embedding_dim, model.head_dim
    per_token = (2 * e + hd * (model.num_q_heads + 2 * model.num_kv_heads) / tp
                 + 3 * model.mlp_hidden_dim * model.num_experts_per_token / tp)
    forward = tokens * per_token * ACTIVATION_BYTES
    if seqs == 0:
        return forward
    sampler = seqs * model.vocab_size * SAMPLER_BYTES_PER_LOGIT + tokens * e * HIDDEN_BYTES_KEPT
    return max(forward, sampler)


def non_torch_bytes(memory: VllmKnobs, num_gpus: int) -> float:
    """The non-torch increase per GPU: the knob, or the fitted default for one GPU or several."""
    if memory.non_torch_gib is not None:
        return memory.non_torch_gib * GIB
    return (NON_TORCH_GIB_ONE_GPU if num_gpus == 1 else NON_TORCH_GIB_SHARDED) * GIB
