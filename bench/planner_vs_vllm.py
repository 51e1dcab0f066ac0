"""The vllm memory planner's KV blocks next to the blocks vLLM reported on public runs.

    python bench/planner_vs_vllm.py [MODEL_CONFIGS]

MODEL_CONFIGS (default ../shared/data/real_vllm/model_configs) holds each model's Hugging Face
`config.json`. The runs: vLLM 0.15.1 on H100 (inference-sim/inference-sim testdata, Apache-2.0)
and vLLM 0.19 on an RTX 4090 (casys-kaist/LLMServingSim, MIT), gpu_memory_utilization 0.9, blocks
of 16 tokens. The Llama-4-Scout specs omit max_model_len; 4096 is what the same team's Scout H100
TP2 deployments set, and it does not enter the count (docs/design/vllm-memory-planner.md).
Prints a Markdown table of the planner's blocks, with each GPU's total as the catalog's
`driver_memory_gib` gives it (H100 80GB: 79.18 GiB; RTX 4090: 25,250,627,584 bytes).
docs/design/vllm-memory-planner.md holds its output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim_core import parse_config  # noqa: E402
from sim_core.catalog.hf_import import load_hf_config  # noqa: E402
from sim_core.memory import plan_memory  # noqa: E402

RUNS = (  # label, config folder, device, TP, max_num_batched_tokens, max_num_seqs, max_model_len, vLLM's blocks
    ("Llama-2-7B H100 TP1", "llama-2-7b-hf", "h100-sxm", 1, 2048, 128, 4096, 7463),
    ("Qwen2.5-7B H100 TP1 mbt 2048", "qwen2.5-7b-instruct", "h100-sxm", 1, 2048, 128, 4096, 65352),
    ("Qwen2.5-7B H100 TP1 mbt 1024", "qwen2.5-7b-instruct", "h100-sxm", 1, 1024, 128, 4096, 65368),
    ("Llama-3.1-70B H100 TP4 mbt 2048", "llama-3.1-70b-instruct", "h100-sxm", 4, 2048, 128, 4096, 30425),
    ("Llama-3.1-70B H100 TP4 mbt 8192", "llama-3.1-70b-instruct", "h100-sxm", 4, 8192, 128, 4096, 30251),
    ("Mistral-Nemo H100 TP1", "mistral-nemo-instruct-2407", "h100-sxm", 1, 2048, 128, 4096, 19251),
    ("Mistral-Nemo H100 TP2 mbt 1024", "mistral-nemo-instruct-2407", "h100-sxm", 2, 1024, 128, 4096, 48009),
    ("Yi-34B H100 TP2", "yi-34b", "h100-sxm", 2, 2048, 128, 4096, 20793),
    ("Llama-3.1-8B RTX 4090 (vLLM 0.19)", "llama-3.1-8b-instruct", "rtx-4090", 1, 2048, 256, 32768, 2588),
    ("Llama-4-Scout FP8 H100 TP2", "llama-4-scout-17b-16e-instruct-fp8-dynamic", "h100-sxm", 2, 2048, 128, 4096, 8253),
)


def planned_blocks(config_json: Path, device: str, tp: int, tokens: int, seqs: int, max_model_len: int) -> int:
    """The vllm planner's blocks for a vllm_v1 replica of the model on `tp` GPUs of the catalog's `device`."""
    config = parse_config({"model": "m", "device": device, "models": {"m": load_hf_config(config_json).model_dump()},
                           "max_model_len": max_model_len,
                           "cluster": {"tensor_parallel_size": tp},
                           "scheduler": {"type": "vllm_v1", "max_num_batched_tokens": tokens, "max_num_seqs": seqs}})
    return plan_memory(config).num_blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_configs", nargs="?", default=str(ROOT.parent / "shared/data/real_vllm/model_configs"))
    folder = Path(parser.parse_args().model_configs)
    print("| run | vLLM | planner | error |")
    print("|---|---:|---:|---:|")
    for label, name, device, tp, tokens, seqs, max_model_len, reported in RUNS:
        blocks = planned_blocks(folder / name / "config.json", device, tp, tokens, seqs, max_model_len)
        print(f"| {label} | {reported:,} | {blocks:,} | {(blocks - reported) / reported:+.2%} |")


if __name__ == "__main__":
    main()
