"""Scenario sections: cluster shape, replica scheduler, memory planning, cost model, engine."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Unknown keys are errors; numbers are finite. (Booleans and strings are not numbers either:
# SimulationConfig checks that before validating, see coercion.py.)
Strict = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

GlobalSchedulerType = Literal["round_robin", "lor", "random"]
ReplicaSchedulerType = Literal["vllm", "sarathi", "orca", "faster_transformer", "lightllm", "vllm_v0", "vllm_v1",
                              "sglang"]

CPU_PHASES = ("schedule", "prepare_inputs", "sample", "process_outputs")  # PredictorConfig.cpu_<phase>_s

# SGLang v0.4's default CUDA-graph capture sizes (cuda_graph_max_bs 160)
SGLANG_GRAPH_SIZES = (1, 2, 4, 8, *range(16, 161, 8))


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


class SchedulerConfig(BaseModel):
    """The per-replica batching policy and its knobs (names follow Vidur)."""

    model_config = Strict

    type: ReplicaSchedulerType = Field("vllm", description=(
        "Batching policy: vllm (prefill-first continuous batching, paged KV), sarathi (chunked "
        "prefill mixed with decodes), orca (iteration-level, reserves max_model_len per request), "
        "faster_transformer (static batches), lightllm (token-level KV, separate prefill/decode) "
        "(these five as Vidur models them); vllm_v0 (vLLM v0.6's V0-engine scheduler: waiting, running "
        "and swapped queues, swap or recompute preemption, parallel samples, optional chunked prefill), "
        "vllm_v1 (vLLM V1 engine: one token budget for decodes and prompt chunks, prefix caching), "
        "sglang (SGLang: prefill batch else decode batch, radix prefix cache, CUDA-graph padding)."))
    batch_size_cap: int = Field(128, ge=1, le=65536, description=(
        "vllm/sarathi/orca/faster_transformer/lightllm: most requests holding KV memory at once; a "
        "batch holds at most batch_size_cap // PP."))
    block_size: int = Field(16, ge=1, le=4096, description=(
        "Tokens per KV-cache block (lightllm requires 1: one block per token)."))
    num_blocks: int | None = Field(None, ge=1, le=1_000_000_000, description=(
        "KV-cache blocks per replica; when absent the memory planner derives it from the model, "
        "device and max_model_len."))
    watermark_blocks_fraction: float = Field(0.01, ge=0.0, le=0.9, description=(
        "vllm/sarathi/vllm_v0: keep int(fraction * num_blocks) blocks free when admitting a new request "
        "(vllm_v0: also when swapping one back in), headroom for running requests to grow."))
    max_tokens_in_batch: int = Field(4096, ge=1, le=10_000_000, description=(
        "vllm: batch size x longest prompt must stay within this; lightllm: sum of prompt tokens "
        "in a prefill batch."))
    chunk_size: int = Field(512, ge=1, le=10_000_000, description=(
        "sarathi: token budget of one iteration shared by decodes and prefill chunks."))
    max_waiting_iters: int = Field(10, ge=0, le=1_000_000, description=(
        "lightllm: decode iterations after which a prefill batch is tried even while requests run."))
    max_num_seqs: int = Field(256, ge=0, le=1_000_000, description=(
        "vllm_v0/vllm_v1: most sequences running at once (vLLM's --max-num-seqs, default 256; a "
        "vllm_v0 request with n parallel samples counts n; vllm_v1 checks it only when admitting a "
        "request, never against one already running); 0 = unbounded."))
    max_num_batched_tokens: int | None = Field(None, ge=1, le=10_000_000, description=(
        "vllm_v0/vllm_v1: tokens one iteration may process, shared by running decodes (1 token "
        "each) and prompt chunks (vLLM's --max-num-batched-tokens); empty: the engine's default "
        "(vllm_v1: 2048; vllm_v0: max(max_model_len, 2048), or 512 with chunked prefill). vllm_v0 "
        "without chunked prefill ignores a prompt longer than min(this, max_model_len)."))
    enable_chunked_prefill: bool = Field(False, description=(
        "vllm_v0: decodes first, then swapped requests, then prompt chunks, all under one token "
        "budget (vLLM's --enable-chunked-prefill); off: an iteration is either prompts only "
        "(whole prompts) or decodes only."))
    preemption_mode: Literal["recompute", "swap"] = Field("recompute", description=(
        "vllm_v0: what a running request gives up when KV blocks run out: recompute (its blocks are "
        "freed; it re-joins the waiting queue's front and its tokens are prefilled again) or swap "
        "(its blocks are copied to CPU swap space over PCIe and copied back before it resumes). A "
        "request with several parallel samples is swapped in both modes, as vLLM does."))
    swap_space_gb: float = Field(4.0, ge=0.0, le=100_000.0, description=(
        "vllm_v0: CPU swap space per GPU in GiB (vLLM's --swap-space, default 4); a swap-out that "
        "does not fit falls back to recompute (vLLM aborts the engine there)."))
    long_prefill_token_threshold: int = Field(0, ge=0, le=10_000_000, description=(
        "vllm_v1: most prompt tokens one request may run in one iteration (longer prompts are "
        "chunked; 0 = only the token budget limits them)."))
    prioritize_prefill: bool = Field(False, description=(
        "vllm_v1: hand the budget to prompt work first (running chunks, then new requests) and "
        "let decodes fill what is left; lower TTFT, higher TBT."))
    scheduling_policy: Literal["fcfs", "priority"] = Field("fcfs", description=(
        "vllm_v1: fcfs (arrival order) or priority (the workload's priority column, smaller "
        "first, ties by arrival): the admission order and, in reverse, the preemption victim."))
    enable_prefix_caching: bool = Field(True, description=(
        "vllm_v1/sglang: reuse the KV blocks of an identical prompt prefix (vllm_v1: hashed full "
        "blocks kept after they are freed; sglang: a radix tree); cached tokens are not computed."))
    max_prefill_tokens: int = Field(16384, ge=1, le=10_000_000, description=(
        "sglang: prompt-token budget of one prefill batch (the first request may exceed it)."))
    chunked_prefill_size: int = Field(8192, ge=0, le=10_000_000, description=(
        "sglang: most prompt tokens in one prefill batch; a longer prompt runs in chunks over "
        "consecutive prefill batches (0 = no chunking)."))
    max_running_requests: int = Field(0, ge=0, le=1_000_000, description=(
        "sglang: request slots: most requests decoding at once (0 = SGLang's default, "
        "min(KV tokens // 2, 4096))."))
    cuda_graph_batch_sizes: list[int] = Field(default_factory=lambda: list(SGLANG_GRAPH_SIZES), max_length=512,
                                              description=(
        "sglang: decode batch sizes with a captured CUDA graph; a decode batch runs (and is priced) "
        "padded up to the next size, larger ones unpadded (empty = no CUDA graphs)."))
    enable_overlap_schedule: bool = Field(True, description=(
        "sglang: schedule the next batch and process the last one's outputs on the CPU while the "
        "GPU runs, hiding that CPU time (pipeline_parallel_size 1; the linear cost model has no "
        "CPU time)."))

    @field_validator("cuda_graph_batch_sizes")
    @classmethod
    def _graph_sizes(cls, sizes: list[int]) -> list[int]:
        if any(size < 1 or size > 65536 for size in sizes):
            raise ValueError("batch sizes must be between 1 and 65536")
        return sorted(set(sizes))


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
