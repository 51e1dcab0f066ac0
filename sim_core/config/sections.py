"""Scenario sections: cluster shape, memory planning, cost model, engine (the replica scheduler's
section is in scheduler.py and policies.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# Unknown keys are errors; numbers are finite; a validated config never changes (build a new one
# with model_copy(update=...)). (Booleans and strings are not numbers either: SimulationConfig
# checks that before validating, see coercion.py.)
Strict = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

GlobalSchedulerType = Literal["round_robin", "lor", "random"]

CPU_PHASES = ("schedule", "prepare_inputs", "sample", "process_outputs")  # PredictorConfig.cpu_<phase>_s


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
    global_scheduler: GlobalSchedulerType = Field("round_robin", description=(
        "Request router: round_robin (i-th request to replica i mod n), lor (fewest waiting "
        "requests, ties to the lowest id) or random (seeded)."))


class MemoryConfig(BaseModel):
    """How KV-cache capacity is derived when num_blocks is not given."""

    model_config = Strict

    planner: Literal["auto", "vidur", "detailed"] = Field("auto", description=(
        "vidur: Vidur's formula (weights of the transformer blocks only, KV for max_model_len "
        "per request); detailed: also embeddings, LM head and an activation reserve; auto: vidur "
        "for the Vidur-named schedulers so their runs match Vidur, detailed otherwise."))
    margin_fraction: float = Field(0.1, ge=0.0, le=0.9, description=(
        "Fraction of device memory left unused (fragmentation, safety; vidur: everything not planned)."))
    framework_reserve_gib: float = Field(1.0, ge=0.0, le=1024.0, description=(
        "detailed: GiB per GPU taken by the serving framework besides weights, activations and KV "
        "(CUDA context, cuBLAS/NCCL workspaces, CUDA graphs)."))


class PredictorConfig(BaseModel):
    """The batch cost model: how long one pipeline stage of a batch takes."""

    model_config = Strict

    type: Literal["linear", "roofline", "learned"] = Field("roofline", description=(
        "linear: base_s + per_token_s x tokens (exact, for teaching and Vidur comparisons); "
        "roofline: per-operator FLOPs and bytes against the device's compute and memory roofs; "
        "learned: per-operator models trained on profiling CSVs in Vidur's format (profiles_dir)."))
    base_s: float = Field(0.005, ge=0.0, le=1000.0, description="linear: fixed seconds per stage.")
    per_token_s: float = Field(0.0001, ge=0.0, le=1000.0, description=(
        "linear: seconds per token processed in the iteration (prompt, chunk or decode token)."))
    compute_efficiency: float | None = Field(None, gt=0.0, le=1.0, description=(
        "roofline: achieved fraction of peak tensor FLOP/s in matrix multiplies (default: the "
        "device's own factor from the catalog)."))
    memory_efficiency: float | None = Field(None, gt=0.0, le=1.0, description=(
        "roofline: achieved fraction of peak memory bandwidth (default: the device's own factor)."))
    link_efficiency: float = Field(0.7, gt=0.0, le=1.0, description=(
        "roofline: achieved fraction of link bandwidth in all-reduce and send/recv."))
    cpu_schedule_s: float = Field(0.0005, ge=0.0, le=10.0, description=(
        "roofline/learned: host seconds per iteration spent in the scheduler (queues, block "
        "tables)."))
    cpu_schedule_per_request_s: float = Field(0.000005, ge=0.0, le=10.0, description=(
        "roofline/learned: extra scheduler seconds per request in the batch."))
    cpu_prepare_inputs_s: float = Field(0.0015, ge=0.0, le=10.0, description=(
        "roofline/learned: host seconds per iteration building the model inputs (token ids, "
        "positions, attention metadata) and copying them to the GPU."))
    cpu_prepare_inputs_per_request_s: float = Field(0.000005, ge=0.0, le=10.0, description=(
        "roofline/learned: extra input-preparation seconds per request in the batch."))
    cpu_sample_s: float = Field(0.001, ge=0.0, le=10.0, description=(
        "roofline/learned: host seconds per iteration in sampling (logits processing, sampler "
        "launch and synchronisation)."))
    cpu_sample_per_request_s: float = Field(0.000005, ge=0.0, le=10.0, description=(
        "roofline/learned: extra sampling seconds per request in the batch."))
    cpu_process_outputs_s: float = Field(0.001, ge=0.0, le=10.0, description=(
        "roofline/learned: host seconds per iteration processing model outputs (appending "
        "tokens, stop checks, detokenisation hand-off)."))
    cpu_process_outputs_per_request_s: float = Field(0.000005, ge=0.0, le=10.0, description=(
        "roofline/learned: extra output-processing seconds per request in the batch."))
    profiles_dir: str | None = Field(None, description=(
        "learned: folder in Vidur's layout (compute/<device>/<org>/<model>/{mlp,attention}.csv, "
        "network/<node>/{all_reduce,send_recv}.csv); operators it lacks are priced by the roofline."))
    estimator: Literal["random_forest", "polynomial"] = Field("random_forest", description=(
        "learned: random_forest (accurate inside the profiled range) or polynomial (smooth, "
        "extrapolates further)."))
    cache_dir: str | None = Field(None, description=(
        "learned: folder where trained prediction grids are cached, keyed by a hash of the "
        "profiles and options (no cache when absent)."))


class EngineConfig(BaseModel):
    """How the simulator itself runs (results do not depend on these)."""

    model_config = Strict

    fast_forward: bool = Field(True, description=(
        "Advance runs of identical decode iterations in one step; gives exactly the results of "
        "iteration-by-iteration simulation, much faster."))
    record: Literal["full", "batches", "requests"] = Field("batches", description=(
        "What to keep besides per-request rows: batches (batch and stage tables, KV and queue "
        "time series: everything the CLI writes), full (also every block allocation and request "
        "state change, for the KV-block animation; the app uses it), requests (only per-request "
        "rows and the summary, for very large runs)."))
