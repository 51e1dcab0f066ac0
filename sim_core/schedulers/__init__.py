"""Replica schedulers: one file per policy on a shared base; register new ones here."""

from collections.abc import Callable

from sim_core.schedulers.base import ReplicaLimits, ReplicaScheduler
from sim_core.schedulers.faster_transformer import FasterTransformerScheduler
from sim_core.schedulers.lightllm import LightLLMScheduler
from sim_core.schedulers.orca import OrcaScheduler
from sim_core.schedulers.sarathi import SarathiScheduler
from sim_core.schedulers.vllm import VllmScheduler
from sim_core.schedulers.vllm_v0_pipeline import vllm_v0_scheduler

SCHEDULERS: dict[str, Callable[..., ReplicaScheduler]] = {
    "vllm": VllmScheduler,
    "sarathi": SarathiScheduler,
    "orca": OrcaScheduler,
    "faster_transformer": FasterTransformerScheduler,
    "lightllm": LightLLMScheduler,
    "vllm_v0": vllm_v0_scheduler,  # one scheduler, or vLLM's virtual engines when PP > 1
}

__all__ = ["SCHEDULERS", "ReplicaLimits", "ReplicaScheduler"]
