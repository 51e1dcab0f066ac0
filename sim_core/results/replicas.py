"""The cluster as a run describes it: one record per replica, handed over by the engine when it
builds the replicas. Views draw replicas from these records only (never from the scenario's
`cluster` section, which P/D disaggregation replaces by its pools)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim_core.memory import MemoryPlan

COLOCATED = "replicas"   # the one pool of a run without P/D disaggregation (cluster/pools.py's name)


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One replica of a run.

    Attributes:
        id: the `replica_id` of every table (replicas of a pool have consecutive ids).
        pool: COLOCATED without P/D disaggregation, else "prefill" or "decode".
        tensor_parallel_size: GPUs that split every layer.
        pipeline_parallel_size: pipeline stages (stage ids 0 .. PP-1).
        num_blocks: KV-cache blocks (block ids 0 .. num_blocks-1).
        block_size: tokens per KV block.
        num_swap_blocks: vllm_v0's CPU swap space in KV blocks per GPU (0 for other policies).
        memory_plan: the memory planner's plan for the replica's pool (None when
            `scheduler.num_blocks` sized it and the planner found the model too large).
        num_offload_blocks: vllm_v1's CPU tier of KV offloading, in KV blocks (0: off).
    """

    id: int
    pool: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    num_blocks: int
    block_size: int
    num_swap_blocks: int = 0
    memory_plan: MemoryPlan | None = None
    num_offload_blocks: int = 0

    @property
    def name(self) -> str:
        """Display name: "replica 3", or its pool's "prefill 0" / "decode 2"."""
        return f"{'replica' if self.pool == COLOCATED else self.pool} {self.id}"

    @property
    def num_gpus(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size


@dataclass(frozen=True, slots=True)
class PoolInfo:
    """One pool of a P/D-disaggregated run: its replicas share a shape (see ReplicaInfo)."""

    name: str
    first_replica: int
    num_replicas: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    num_blocks: int

    @property
    def replica_ids(self) -> range:
        return range(self.first_replica, self.first_replica + self.num_replicas)


def pools_of(replicas: Sequence[ReplicaInfo]) -> list[PoolInfo]:
    """The pools of a P/D-disaggregated run in replica-id order (prefill, then decode); empty
    without disaggregation. The replicas of a pool are consecutive and share its shape."""
    if all(replica.pool == COLOCATED for replica in replicas):
        return []
    pools = []
    for name, group in groupby(replicas, key=lambda replica: replica.pool):
        first, *rest = group
        pools.append(PoolInfo(name, first.id, 1 + len(rest), first.tensor_parallel_size,
                              first.pipeline_parallel_size, first.num_blocks))
    assert len({pool.name for pool in pools}) == len(pools), "a pool's replicas are consecutive"
    return pools
