"""P/D disaggregation: a prefill pool and a decode pool of replicas joined by KV-cache links."""

from __future__ import annotations

from pydantic import BaseModel, Field

from sim_core.config.sections import GlobalSchedulerType, Strict


class PoolConfig(BaseModel):
    """One pool of identical replicas; sizes left empty follow the scenario's scheduler."""

    model_config = Strict

    num_replicas: int = Field(1, ge=1, le=1024, description="Replicas in this pool.")
    tensor_parallel_size: int = Field(1, ge=1, le=64, description=(
        "GPUs that split every layer of a replica of this pool (TP); must divide the model's query heads."))
    pipeline_parallel_size: int = Field(1, ge=1, le=64, description=(
        "Pipeline stages per replica of this pool (PP); a replica keeps up to PP batches in flight."))
    global_scheduler: GlobalSchedulerType = Field("round_robin", description=(
        "How requests are spread over this pool's replicas: any of cluster.global_scheduler's "
        "routers (for the decode pool, waiting and outstanding include hand-offs not yet "
        "accepted)."))
    num_blocks: int | None = Field(None, ge=1, le=1_000_000_000, description=(
        "KV-cache blocks per replica of this pool; empty: scheduler.num_blocks, or the memory "
        "planner for this pool's TP and PP when that is empty too."))
    batch_size_cap: int | None = Field(None, ge=1, le=65536, description=(
        "Most requests holding KV memory at once on a replica of this pool; empty: scheduler.batch_size_cap."))


class DisaggregationConfig(BaseModel):
    """Prefill and decode on separate replicas (DistServe / Splitwise style, as vLLM and SGLang
    PD disaggregation deploy it); when enabled, `cluster` sizes are replaced by the two pools."""

    model_config = Strict

    enabled: bool = Field(False, description=(
        "Run prompts on the prefill pool and the rest of each answer on the decode pool; the KV "
        "cache of the prompt moves between them over a link. Replaces the cluster's replicas."))
    prefill: PoolConfig = Field(default_factory=PoolConfig, description="Replicas that run prompts.")
    decode: PoolConfig = Field(default_factory=PoolConfig, description="Replicas that generate output tokens.")
    link_bandwidth_gb_s: float = Field(25.0, gt=0.0, le=100_000.0, description=(
        "Bandwidth of each prefill replica's KV link, in GB/s (10^9 bytes per second); its "
        "transfers run one at a time."))
    link_latency_s: float = Field(0.001, ge=0.0, le=100.0, description=(
        "Fixed cost of one KV transfer in seconds; a transfer takes latency + KV bytes / bandwidth."))
