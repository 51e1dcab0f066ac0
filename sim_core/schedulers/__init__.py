"""Replica schedulers: one file per policy on a shared base; register new ones here."""

from sim_core.schedulers.base import ReplicaLimits, ReplicaScheduler
from sim_core.schedulers.faster_transformer import FasterTransformerScheduler
from sim_core.schedulers.lightllm import LightLLMScheduler
from sim_core.schedulers.orca import OrcaScheduler
from sim_core.schedulers.sarathi import SarathiScheduler
from sim_core.schedulers.vllm import VllmScheduler
from sim_core.schedulers.vllm_v0 import VllmV0Scheduler

SCHEDULERS: dict[str, type[ReplicaScheduler]] = {
    "vllm": VllmScheduler,
    "sarathi": SarathiScheduler,
    "orca": OrcaScheduler,
    "faster_transformer": FasterTransformerScheduler,
    "lightllm": LightLLMScheduler,
    "vllm_v0": VllmV0Scheduler,
}

__all__ = ["SCHEDULERS", "ReplicaLimits", "ReplicaScheduler"]
