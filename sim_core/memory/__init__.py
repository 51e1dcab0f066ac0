"""KV-cache memory: the planner (how much) and the block pool (which block, whose)."""

from sim_core.memory.block_pool import BlockPool, CountingBlockPool
from sim_core.memory.breakdown import MemoryBreakdown, StageMemory, memory_breakdown
from sim_core.memory.planner import MemoryPlan, detailed_plan, plan_memory, vidur_plan
from sim_core.memory.vllm_plan import vllm_plan

__all__ = ["BlockPool", "CountingBlockPool", "MemoryBreakdown", "MemoryPlan", "StageMemory", "detailed_plan",
           "memory_breakdown", "plan_memory", "vidur_plan", "vllm_plan"]
