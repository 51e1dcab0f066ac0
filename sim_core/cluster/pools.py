"""Replica pools: the cluster as one pool, or a prefill and a decode pool (P/D disaggregation).

Each pool sees the scenario through its own `SimulationConfig` (its replica count, TP, PP,
router, and KV-block and batch-size overrides), so the memory planner, the cost model and the
schedulers of a pool are built exactly as for a plain cluster of that shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim_core.config import ClusterConfig, PoolConfig, SimulationConfig


@dataclass(frozen=True)
class PoolView:
    """A pool's name, its scenario, and the id of its first replica (ids are consecutive)."""

    name: str                 # "replicas" (no disaggregation), "prefill" or "decode"
    config: SimulationConfig
    first_replica: int

    @property
    def num_replicas(self) -> int:
        """The pool's scheduling replicas: each DP rank of a replica is one (own batch and KV
        cache, routed to by the global scheduler), so cluster.num_replicas x data_parallel_size."""
        return self.config.cluster.num_replicas * self.config.cluster.data_parallel_size

    @property
    def replica_ids(self) -> range:
        return range(self.first_replica, self.first_replica + self.num_replicas)


def pool_views(config: SimulationConfig) -> list[PoolView]:
    """One view per pool: the scenario itself without disaggregation, else prefill then decode."""
    pd = config.disaggregation
    if not pd.enabled:
        return [PoolView("replicas", config, 0)]
    prefill = _view(config, pd.prefill)
    return [PoolView("prefill", prefill, 0),
            PoolView("decode", _view(config, pd.decode), prefill.cluster.num_replicas)]


def _view(config: SimulationConfig, pool: PoolConfig) -> SimulationConfig:
    cluster = ClusterConfig(num_replicas=pool.num_replicas, tensor_parallel_size=pool.tensor_parallel_size,
                            pipeline_parallel_size=pool.pipeline_parallel_size,
                            global_scheduler=pool.global_scheduler)
    sizes = {name: getattr(pool, name) for name in ("num_blocks", "batch_size_cap") if getattr(pool, name) is not None}
    scheduler = config.scheduler.model_copy(update=sizes)
    return config.model_copy(update={"cluster": cluster, "scheduler": scheduler,
                                     "disaggregation": config.disaggregation.model_copy(update={"enabled": False})})


def num_gpus(config: SimulationConfig) -> int:
    """GPUs a scenario uses: replicas x DP x TP x PP, summed over the pools (P/D disaggregation)."""
    return sum(view.num_replicas * view.config.cluster.tensor_parallel_size
               * view.config.cluster.pipeline_parallel_size for view in pool_views(config))
