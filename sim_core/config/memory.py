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

    planner: Literal["auto", "vidur", "detailed"] = Field("auto", description=(
        "vidur: Vidur's formula (weights of the transformer blocks only, KV for max_model_len "
        "per request); detailed: also embeddings, LM head and an activation reserve; auto: vidur "
        "for the Vidur-named schedulers so their runs match Vidur, detailed otherwise."))
    margin_fraction: float = Field(0.1, ge=0.0, le=0.9, description=(
        "Fraction of device memory left unused (fragmentation, safety; vidur: everything not planned)."))


class VidurMemoryConfig(MemoryConfig):
    """The knobs Vidur's planner reads."""

    planner: Literal["vidur"] = "vidur"


class ReservingMemoryConfig(MemoryConfig):
    """The planners that may run the detailed plan, which also sets aside the framework's memory."""

    framework_reserve_gib: float = Field(1.0, ge=0.0, le=1024.0, description=(
        "detailed: GiB per GPU taken by the serving framework besides weights, activations and KV "
        "(CUDA context, cuBLAS/NCCL workspaces, CUDA graphs)."))


class AutoMemoryConfig(ReservingMemoryConfig):
    """The knobs of `auto`: the detailed planner's, which it runs for most policies."""

    planner: Literal["auto"] = "auto"


class DetailedMemoryConfig(ReservingMemoryConfig):
    """The knobs the detailed planner reads."""

    planner: Literal["detailed"] = "detailed"


PLANNERS = Choices(MemoryConfig, "planner", {
    "auto": AutoMemoryConfig, "vidur": VidurMemoryConfig, "detailed": DetailedMemoryConfig})
add_choices(PLANNERS)
