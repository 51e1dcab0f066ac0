"""Built-in scenarios (the app's default and presets), as plain dicts over SimulationConfig."""

from __future__ import annotations

from sim_core.config import SimulationConfig, parse_config

DEFAULT_SCENARIO = {
    "name": "default: Llama-2-13B on A100-40GB, 2 replicas, vLLM, 5 req/s",
    "seed": 42,
    "model": "llama-2-13b",
    "device": "a100-40gb",
    "max_model_len": 4096,
    "cluster": {"num_replicas": 2, "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
                "global_scheduler": "round_robin"},
    "scheduler": {"type": "vllm", "batch_size_cap": 128, "block_size": 16},
    "predictor": {"type": "roofline"},
    "engine": {"record": "full"},
    "workload": {"num_requests": 300, "arrival": {"process": "poisson", "qps": 5.0},
                 "prompt_tokens": {"distribution": "uniform", "min": 64, "max": 1024},
                 "output_tokens": {"distribution": "uniform", "min": 16, "max": 256}},
}


def default_scenario() -> SimulationConfig:
    """The scenario the app opens with: a synthetic chat workload that keeps a 768-block KV cache
    busy (peaks at 100%, a few preemptions), so every view has something to show."""
    return parse_config(DEFAULT_SCENARIO)
