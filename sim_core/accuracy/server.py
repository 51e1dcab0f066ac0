"""The server a measured run used, as a scenario: model, GPU, parallelism and vLLM's knobs.

Names in benchmark files are Hugging Face repositories and marketing GPU names; they map to
catalog ids here. vLLM's defaults fill what a run does not state (V1 engine, async scheduling,
chunked prefill and prefix caching on, gpu_memory_utilization 0.9, and its API server's batch
limits for the GPU: `vllm_batch_defaults`).
"""

from __future__ import annotations

import re
from typing import Any

from sim_core.catalog import DEVICES, MODELS
from sim_core.catalog.vidur_names import VIDUR_MODELS
from sim_core.errors import ConfigError

# lowercase fragments of a GPU's name (a run's hardware field or folder name) -> catalog id; the
# first match wins, so longer names come first
GPU_NAMES = (("h100 pcie", "h100-pcie"), ("h100-pcie", "h100-pcie"), ("h100", "h100-sxm"), ("h200", "h200"),
             ("h20", "h20"), ("gh200", "gh200"), ("b200", "b200"), ("b300", "b300"), ("gb200", "gb200"),
             ("a100-40", "a100-40gb"), ("a100", "a100-80gb"), ("l40s", "l40s"), ("rtx4090", "rtx-4090"),
             ("rtx 4090", "rtx-4090"), ("rtx pro 6000", "rtx-pro-6000"), ("rtx-pro-6000", "rtx-pro-6000"),
             ("rtxpro6000", "rtx-pro-6000"),
             ("a40", "a40"), ("a30", "a30"), ("mi300x", "mi300x"), ("mi325x", "mi325x"), ("mi355x", "mi355x"))
MODEL_SUFFIXES = ("-instruct-hf", "-instruct", "-chat-hf", "-hf")
# vLLM's API-server defaults (EngineArgs.get_batch_defaults): (max_num_batched_tokens, max_num_seqs)
# on a GPU of at least 70 GiB that is not an A100 (H100, H200, B200, ...), else on every other GPU
VLLM_LARGE_GPU_GIB = 70.0
VLLM_LARGE_GPU_BATCH = (8192, 1024)
VLLM_BATCH = (2048, 256)
VLLM_MAX_MODEL_LEN = 4096   # when a run gives none: our default (vLLM takes the model's own)


def device_of(*hints: str) -> str | None:
    """Catalog id of the first GPU named in the hints (a hardware field, a folder name), if any."""
    for hint in hints:
        text = hint.lower().replace("_", "-")
        for fragment, device in GPU_NAMES:
            if re.search(rf"(^|[^a-z0-9]){re.escape(fragment)}", text) and device in DEVICES:
                return device
    return None


def model_of(repository: str) -> str | None:
    """Catalog id of a Hugging Face model repository (`meta-llama/Llama-2-7b-hf`), if it has one."""
    key = repository.lower().strip("/")
    candidates = (key, *(key.removesuffix(s) for s in MODEL_SUFFIXES if key.endswith(s)),
                  re.sub(r"-instruct-\d{4}$", "", key))     # Qwen3's dated releases: -instruct-2507
    for candidate in candidates:                              # the catalog's own id first, then Vidur's names
        if candidate.split("/")[-1] in MODELS:
            return candidate.split("/")[-1]
    return next((VIDUR_MODELS[candidate] for candidate in candidates if candidate in VIDUR_MODELS), None)


def vllm_batch_defaults(device: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM's API server takes on `device` when the run
    sets neither: 8192 and 1024 on a GPU whose driver reports at least 70 GiB, but not on an
    A100 (larger budgets slowed it, vLLM PR #17885), else 2048 and 256."""
    spec = DEVICES.get(device)
    if spec is None:     # not a catalog GPU: the scenario's validation names it
        return VLLM_BATCH
    memory = spec.driver_memory_gib or spec.memory_gib
    large = memory >= VLLM_LARGE_GPU_GIB and "a100" not in spec.name.lower()
    return VLLM_LARGE_GPU_BATCH if large else VLLM_BATCH


def vllm_scenario(name: str, model: str, device: str, tp: int, knobs: dict[str, Any], seed: int = 42,
                  models: dict[str, Any] | None = None) -> dict[str, Any]:
    """A scenario document for vLLM V1 serving `model` on `tp` GPUs of `device` with `knobs`
    (vLLM's own names: max_num_seqs, max_num_batched_tokens, max_model_len, block_size,
    num_gpu_blocks / total_kv_blocks, gpu_memory_utilization, enable_prefix_caching,
    async_scheduling, data_parallel_size, enable_expert_parallel); `models` adds model shapes
    outside the catalog (id -> ModelSpec fields)."""
    if model not in MODELS and model not in (models or {}):
        raise ConfigError(f"{name}: model {model!r} is not in the catalog")
    knobs = {key: value for key, value in knobs.items() if value is not None}
    default_tokens, default_seqs = vllm_batch_defaults(device)
    scheduler: dict[str, Any] = {
        "type": "vllm_v1", "max_num_seqs": int(knobs.get("max_num_seqs") or default_seqs),
        "max_num_batched_tokens": int(knobs.get("max_num_batched_tokens") or default_tokens),
        "enable_prefix_caching": bool(knobs.get("enable_prefix_caching", True)),
        "block_size": int(knobs.get("block_size") or 16),
        "async_scheduling": bool(knobs.get("async_scheduling", True)),
    }
    blocks = knobs.get("num_gpu_blocks") or knobs.get("total_kv_blocks")
    if blocks:
        scheduler["num_blocks"] = int(blocks)
    extra: dict[str, Any] = {"models": models} if models else {}
    if not blocks and knobs.get("gpu_memory_utilization"):    # the vllm planner sizes the KV cache as vLLM did
        extra["memory"] = {"gpu_memory_utilization": float(knobs["gpu_memory_utilization"])}
    return {**extra, "name": name, "seed": seed, "model": model, "device": device,
            "max_model_len": int(knobs.get("max_model_len") or VLLM_MAX_MODEL_LEN),
            "cluster": _cluster(model, tp, knobs, models), "scheduler": scheduler, "engine": {"record": "requests"}}


def _cluster(model: str, tp: int, knobs: dict[str, Any], models: dict[str, Any] | None) -> dict[str, Any]:
    """The cluster section: `tp` GPUs per rank and vLLM's data parallelism. vLLM's
    `--data-parallel-size` runs DP engine cores behind one API server, which sends each request
    to the core with the lowest `4 x waiting + running` (v1/engine/core_client.py,
    DPLBAsyncMPClient); the nearest router here is least_outstanding (waiting + running). On a MoE
    model the ranks share the MoE layers (cluster.data_parallel_size) and
    `--enable-expert-parallel` splits the experts over all DP x TP GPUs; on a dense model the
    ranks are independent replicas."""
    cluster: dict[str, Any] = {"num_replicas": 1, "tensor_parallel_size": int(tp), "pipeline_parallel_size": 1}
    dp = int(knobs.get("data_parallel_size") or 1)
    if dp <= 1:
        return cluster
    spec = MODELS.get(model)
    num_experts = spec.num_experts if spec is not None else int((models or {}).get(model, {}).get("num_experts", 1))
    if num_experts > 1:
        cluster["data_parallel_size"] = dp
        if knobs.get("enable_expert_parallel") is True:
            cluster["expert_parallel_size"] = dp * int(tp)
    else:
        cluster["num_replicas"] = dp
    return {**cluster, "global_scheduler": "least_outstanding"}
