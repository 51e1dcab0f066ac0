"""Scenario sections: cluster shape, engine (the sections with choices have files of their own:
scheduler.py and policies.py, memory.py, predictor.py, arrival.py, lengths.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sim_core.catalog.precision import KvCacheDtype

# Unknown keys are errors; numbers are finite; a validated config never changes (build a new one
# with model_copy(update=...)). (Booleans and strings are not numbers either: SimulationConfig
# checks that before validating, see coercion.py.)
Strict = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

GlobalSchedulerType = Literal["round_robin", "lor", "random", "least_outstanding", "least_kv", "prefix_affinity",
                              "power_of_two"]


class ClusterConfig(BaseModel):
    """How many model replicas, and how each is split over GPUs."""

    model_config = Strict

    num_replicas: int = Field(1, ge=1, le=1024, description=(
        "Independent copies of the model; the global scheduler routes each request to one."))
    tensor_parallel_size: int = Field(1, ge=1, le=64, description=(
        "GPUs that split every layer of a replica (TP); must divide the model's query heads."))
    pipeline_parallel_size: int = Field(1, ge=1, le=64, description=(
        "Pipeline stages per replica (PP); each stage holds num_layers / PP layers and a replica "
        "keeps up to PP batches in flight."))
    data_parallel_size: int = Field(1, ge=1, le=64, description=(
        "MoE models: attention data-parallel ranks per replica (vLLM's --data-parallel-size). Each "
        "rank has TP x PP GPUs, its own batch and KV cache and is routed requests like a replica; "
        "the MoE layers run over all DP x TP GPUs. A replica then uses DP x TP x PP GPUs."))
    expert_parallel_size: int = Field(1, ge=1, le=4096, description=(
        "MoE models: GPUs the experts are split over (EP): 1 (each expert TP-sharded) or DP x TP "
        "(vLLM's --enable-expert-parallel: each GPU holds num_experts / EP whole experts; tokens "
        "reach them as all2all_backend says). Must divide the model's experts."))
    all2all_backend: Literal["allgather_reducescatter", "all_to_all"] = Field("allgather_reducescatter", description=(
        "MoE models with DP or EP > 1: how tokens reach the experts. allgather_reducescatter (vLLM's "
        "default): every DP rank's hidden states gathered to all, reduce-scattered back; all_to_all "
        "(vLLM's DeepEP backends): each token's top-k copies sent to the GPUs holding its experts."))
    global_scheduler: GlobalSchedulerType = Field("round_robin", description=(
        "Request router: round_robin (i-th request to replica i mod n), lor (Vidur's rule: fewest "
        "waiting requests, running ones not counted, ties to the lowest id), random (seeded), "
        "least_outstanding (fewest waiting + running), least_kv (fewest KV blocks in use), "
        "prefix_affinity (longest cached prompt prefix among replicas within 4 outstanding "
        "requests of the least loaded) or power_of_two (the less loaded of two seeded draws). "
        "Ties go to the lowest replica id."))
    kv_cache_dtype: KvCacheDtype = Field("auto", description=(
        "Format of the KV cache: auto (the model's 16-bit activation format, also for FP8-quantized "
        "weights, as vLLM's --kv-cache-dtype auto), bf16, fp16 or fp8 (half the bytes per token)."))


class EngineConfig(BaseModel):
    """How the simulator itself runs (results do not depend on these)."""

    model_config = Strict

    fast_forward: bool = Field(True, description=(
        "Advance runs of identical decode iterations in one step; gives exactly the results of "
        "iteration-by-iteration simulation, much faster."))
    record: Literal["full", "batches", "series", "requests"] = Field("batches", description=(
        "What to keep besides per-request rows: batches (batch and stage tables, KV and queue "
        "time series: everything the CLI writes), full (also every block allocation and request "
        "state change, for the KV-block animation and request timelines), series (the time series, "
        "the stage table and a batch table of ids, replicas, times and token counts only: what the "
        "app's Overview reads), requests (only per-request rows and the summary, for very large runs)."))
