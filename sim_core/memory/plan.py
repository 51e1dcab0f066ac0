"""What a memory planner returns: one GPU's budget and the KV capacity it leaves."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class MemoryPlan:
    """The per-GPU memory budget of a replica and the KV capacity it leaves (figures of the GPU
    that decides: the pipeline stage with the fewest blocks)."""

    planner: str
    device_bytes: float
    margin_bytes: float          # left unused on purpose (vllm: 1 - gpu_memory_utilization)
    weight_bytes: float
    activation_bytes: float
    kv_bytes: float
    kv_bytes_per_block: float
    num_blocks: int
    max_batch_size: int          # requests that fit at max_model_len (Orca/FT batch limit)
    blocks_per_request: int      # max_model_len // block_size
    reserve_bytes: float = 0.0   # framework reserve (detailed planner)
    non_torch_bytes: float = 0.0     # vllm: memory outside PyTorch's allocator
    cuda_graph_bytes: float = 0.0    # vllm: CUDA graphs taken from the KV budget
    stage_activation_bytes: tuple[float, ...] = ()   # vllm: per pipeline stage (only the last samples)

    def activations_of(self, stage: int) -> float:
        """Activation bytes on a GPU of pipeline stage `stage`."""
        return self.stage_activation_bytes[stage] if self.stage_activation_bytes else self.activation_bytes
