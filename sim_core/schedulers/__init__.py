"""Replica schedulers: one file per policy on a shared base.

A policy's file holds its scheduler class, whose `traits` name its config model (the knobs it
reads). Adding a policy = its file + one entry in POLICIES below: registering makes its type a
choice of `scheduler.type` (the scenario validates its knobs) and of the run.
"""

from sim_core.config.policies import add_policies, remove_policy
from sim_core.schedulers.base import ReplicaLimits, ReplicaScheduler, SchedulerFactory
from sim_core.schedulers.faster_transformer import FasterTransformerScheduler
from sim_core.schedulers.lightllm import LightLLMScheduler
from sim_core.schedulers.orca import OrcaScheduler
from sim_core.schedulers.sarathi import SarathiScheduler
from sim_core.schedulers.sglang import SglangScheduler
from sim_core.schedulers.vllm import VllmScheduler
from sim_core.schedulers.vllm_v0_pipeline import vllm_v0_scheduler
from sim_core.schedulers.vllm_v1 import VllmV1Scheduler

POLICIES: tuple[SchedulerFactory, ...] = (
    VllmScheduler,        # the first is the default scheduler.type
    SarathiScheduler,
    OrcaScheduler,
    FasterTransformerScheduler,
    LightLLMScheduler,
    vllm_v0_scheduler,    # one scheduler, or vLLM's virtual engines when PP > 1
    VllmV1Scheduler,
    SglangScheduler,
)

SCHEDULERS: dict[str, SchedulerFactory] = {}   # scheduler.type -> policy, filled by register


def register(*policies: SchedulerFactory) -> None:
    """Make the policies choices of `scheduler.type` (their traits name their config models)."""
    for policy in policies:
        SCHEDULERS[policy.traits.name] = policy
    add_policies(*(policy.traits for policy in policies))


def unregister(name: str) -> None:
    """Undo `register` (tests register toy policies and take them back)."""
    del SCHEDULERS[name]
    remove_policy(name)


register(*POLICIES)


def scheduler_label(name: str) -> str:
    """`name` with the engine (and version) it mirrors, for the UI: "vllm_v1 · vLLM V1 engine (v0.33)"."""
    policy = SCHEDULERS.get(name)
    return f"{name} · {policy.traits.label}" if policy is not None else name


__all__ = ["POLICIES", "SCHEDULERS", "ReplicaLimits", "ReplicaScheduler", "register", "scheduler_label",
           "unregister"]
