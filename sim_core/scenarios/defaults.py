"""Built-in scenarios (the app's default and presets), as plain dicts over SimulationConfig."""

from __future__ import annotations

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
