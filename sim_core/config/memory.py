"""The memory section (KV-capacity planning): one config model per `planner`, with only the
knobs that planner reads."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sim_core.config.choices import ChoiceBase, Choices, add_choices
from sim_core.config.sections import Strict


class MemoryConfig(ChoiceBase):
    """How KV-cache capacity is derived when num_blocks is not given."""

    model_config = Strict

    planner: Literal["auto", "vidur", "detailed", "vllm"] = Field("auto", description=(
        "vidur: Vidur's formula (weights of the transformer blocks only, KV for max_model_len "
        "per request); detailed: also embeddings, LM head and an activation reserve; vllm: what "
        "vLLM's memory profiling leaves for the KV cache under gpu_memory_utilization; auto: the "
        "policy's own (vidur for the Vidur-named schedulers so their runs match Vidur, vllm for "
        "vllm_v1 and vllm_v0, detailed otherwise)."))


class MarginMemoryConfig(MemoryConfig):
    """The planners that leave a fixed fraction of the device unused."""

    margin_fraction: float = Field(0.1, ge=0.0, le=0.9, description=(
        "vidur/detailed: fraction of device memory left unused (fragmentation, safety; vidur: "
        "everything not planned)."))


class VidurMemoryConfig(MarginMemoryConfig):
    """The knobs Vidur's planner reads."""

    planner: Literal["vidur"] = "vidur"


class ReservingMemoryConfig(MarginMemoryConfig):
    """The planners that may run the detailed plan, which also sets aside the framework's memory."""

    framework_reserve_gib: float = Field(1.0, ge=0.0, le=1024.0, description=(
        "detailed: GiB per GPU taken by the serving framework besides weights, activations and KV "
        "(CUDA context, cuBLAS/NCCL workspaces, CUDA graphs)."))


class DetailedMemoryConfig(ReservingMemoryConfig):
    """The knobs the detailed planner reads."""

    planner: Literal["detailed"] = "detailed"


class VllmKnobs(MemoryConfig):
    """The knobs of vLLM's KV budget (`memory/vllm_plan.py`)."""

    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=1.0, description=(
        "vllm: fraction of each GPU's memory vLLM may use (its --gpu-memory-utilization, default "
        "0.9); the KV cache gets what is left of it after weights, the profile run's activations "
        "and the non-torch memory."))
    non_torch_gib: float | None = Field(None, ge=0.0, le=1024.0, description=(
        "vllm: GiB per GPU that vLLM's profiling counts outside PyTorch's allocator (kernels "
        "loaded on first use, cuBLAS/NCCL buffers); empty: 0.2 on one GPU, 0.7 with TP or PP > 1 "
        "(fitted on public vLLM 0.15.1 H100 runs)."))
    cuda_graph_gib: float = Field(0.0, ge=0.0, le=1024.0, description=(
        "vllm: GiB per GPU of CUDA graphs taken from the KV budget. vLLM 0.21 and later subtract "
        "their CUDA-graph estimate (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, typically 0.1-1 "
        "GiB); 0.15 and 0.19, the versions the defaults are fitted on, capture graphs after "
        "sizing the KV cache: 0."))


class VllmMemoryConfig(VllmKnobs):
    """The knobs the vllm planner reads."""

    planner: Literal["vllm"] = "vllm"


class AutoMemoryConfig(ReservingMemoryConfig, VllmKnobs):
    """The knobs of `auto`: those of every planner it may run for the policy."""

    planner: Literal["auto"] = "auto"


PLANNERS = Choices(MemoryConfig, "planner", {
    "auto": AutoMemoryConfig, "vidur": VidurMemoryConfig, "detailed": DetailedMemoryConfig,
    "vllm": VllmMemoryConfig})
add_choices(PLANNERS)
