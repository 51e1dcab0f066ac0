"""Where each GPU's memory goes, per pipeline stage: the planner's arithmetic made chartable.

Every stage's GPU splits its memory into weights (its layers; the embedding on the first
stage, the LM head on the last), activations, framework reserve (vidur/detailed) or non-torch
memory and CUDA graphs (vllm), margin (vllm: the 1 - gpu_memory_utilization headroom), KV cache
(the blocks the replica actually gets) and what is left unused (other stages may be tighter: the
tightest one decides the number of blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sim_core.config import SimulationConfig
from sim_core.memory.model_bytes import stage_weight_bytes
from sim_core.memory.planner import MemoryPlan, plan_memory
from sim_core.memory.vllm_plan import rotary_cache_bytes

COMPONENTS = ("weights", "activations", "reserve", "margin", "kv_cache", "unused")
VLLM_COMPONENTS = ("weights", "activations", "non_torch", "cuda_graphs", "margin", "kv_cache", "unused")


@dataclass(frozen=True)
class StageMemory:
    """Bytes on one GPU of a pipeline stage, by component (they sum to the device's memory)."""

    stage: int
    weights: float
    activations: float
    reserve: float
    margin: float
    kv_cache: float
    unused: float
    non_torch: float = 0.0      # vllm: outside PyTorch's allocator
    cuda_graphs: float = 0.0    # vllm: CUDA graphs taken from the KV budget


@dataclass(frozen=True)
class MemoryBreakdown:
    """A replica's memory plan: per-stage bytes, and the KV capacity they leave."""

    planner: str
    device_bytes: float
    stages: tuple[StageMemory, ...]
    num_blocks: int
    block_size: int
    kv_token_capacity: int      # tokens the replica's KV blocks hold
    max_batch_size: int         # requests that fit at max_model_len

    @property
    def components(self) -> tuple[str, ...]:
        """The StageMemory parts this planner fills, in drawing order."""
        return VLLM_COMPONENTS if self.planner == "vllm" else COMPONENTS

    def frame(self) -> pd.DataFrame:
        """One row per (stage, component) with bytes and GiB (for stacked bar charts)."""
        rows = [{"stage": s.stage, "component": c, "bytes": getattr(s, c)}
                for s in self.stages for c in self.components]
        frame = pd.DataFrame(rows)
        frame["gib"] = frame["bytes"] / 1024**3
        return frame


def memory_breakdown(config: SimulationConfig, plan: MemoryPlan | None = None) -> MemoryBreakdown:
    """The breakdown of the configured planner (runs it unless `plan` is given).

    Raises:
        ConfigError: the model does not fit (see plan_memory).
    """
    plan = plan or plan_memory(config)
    model, tp, pp = config.model_spec(), config.cluster.tensor_parallel_size, config.cluster.pipeline_parallel_size
    stages = []
    for stage in range(pp):
        if plan.planner == "vidur":  # Vidur: block weights only, KV of max_batch full-length requests per stage
            weights = plan.weight_bytes
            kv = plan.max_batch_size * plan.blocks_per_request * plan.kv_bytes_per_block
        else:   # vllm: the rotary cache is loaded with the weights (memory/vllm_plan.py)
            rotary = rotary_cache_bytes(model) if plan.planner == "vllm" else 0.0
            weights = stage_weight_bytes(model, tp, pp, stage, config.moe_layout()) + rotary
            kv = plan.num_blocks * plan.kv_bytes_per_block
        activations = plan.activations_of(stage)
        used = (weights + activations + plan.reserve_bytes + plan.non_torch_bytes + plan.cuda_graph_bytes
                + plan.margin_bytes + kv)
        stages.append(StageMemory(stage, weights, activations, plan.reserve_bytes, plan.margin_bytes, kv,
                                  max(plan.device_bytes - used, 0.0), plan.non_torch_bytes, plan.cuda_graph_bytes))
    block = config.scheduler.block_size
    return MemoryBreakdown(plan.planner, plan.device_bytes, tuple(stages), plan.num_blocks, block,
                           plan.num_blocks * block, plan.max_batch_size)
