"""Replica schedulers: one file per policy on a shared base; register new ones here."""

from sim_core.schedulers.base import ReplicaLimits, ReplicaScheduler, SchedulerFactory
from sim_core.schedulers.faster_transformer import FasterTransformerScheduler
from sim_core.schedulers.lightllm import LightLLMScheduler
from sim_core.schedulers.orca import OrcaScheduler
from sim_core.schedulers.sarathi import SarathiScheduler
from sim_core.schedulers.sglang import SglangScheduler
from sim_core.schedulers.vllm import VllmScheduler
from sim_core.schedulers.vllm_v0_pipeline import vllm_v0_scheduler
from sim_core.schedulers.vllm_v1 import VllmV1Scheduler

SCHEDULERS: dict[str, SchedulerFactory] = {
    "vllm": VllmScheduler,
    "sarathi": SarathiScheduler,
    "orca": OrcaScheduler,
    "faster_transformer": FasterTransformerScheduler,
    "lightllm": LightLLMScheduler,
    "vllm_v0": vllm_v0_scheduler,  # one scheduler, or vLLM's virtual engines when PP > 1
    "vllm_v1": VllmV1Scheduler,
    "sglang": SglangScheduler,
}



def scheduler_label(name: str) -> str:
    """`name` with the engine (and version) it mirrors, for the UI: "vllm_v1 · vLLM V1 engine (v0.8+)"."""
    policy = SCHEDULERS.get(name)
    return f"{name} · {policy.label}" if policy is not None else name


__all__ = ["SCHEDULERS", "ReplicaLimits", "ReplicaScheduler", "scheduler_label"]
