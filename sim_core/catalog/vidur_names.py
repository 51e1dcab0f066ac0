"""Vidur's profile folder names -> catalog ids.

Vidur lays profiles out as `compute/<device>/<org>/<model>/` and `network/<node>/`. Its device
names are short (`a100`, `h100`, `a40`) and its node names add the topology
(`a100_pairwise_nvlink`, `h100_dgx`); its model names are Hugging Face repository ids.
"""

from __future__ import annotations

# Vidur profiled A100s and H100s with 80 GB; other short names equal our ids.
VIDUR_DEVICES = {"a100": "a100-80gb", "h100": "h100-sxm", "a40": "a40", "a30": "a30", "h200": "h200",
                 "b200": "b200", "l40s": "l40s", "mi300x": "mi300x", "rtx4090": "rtx-4090"}

VIDUR_MODELS = {
    "meta-llama/llama-2-7b-hf": "llama-2-7b",
    "meta-llama/llama-2-13b-hf": "llama-2-13b",
    "meta-llama/llama-2-70b-hf": "llama-2-70b",
    "meta-llama/meta-llama-3-8b": "llama-3-8b",
    "meta-llama/meta-llama-3-70b": "llama-3-70b",
    "meta-llama/llama-3.1-8b": "llama-3-8b",
    "meta-llama/llama-3.1-70b": "llama-3-70b",
    "mistralai/mistral-7b-v0.1": "mistral-7b",
    "codellama/codellama-34b-instruct-hf": "codellama-34b",
    "codellama/codellama-34b-hf": "codellama-34b",
    "microsoft/phi-2": "phi-2",
    "mistralai/mixtral-8x7b-v0.1": "mixtral-8x7b",
    # Qwen2-7B has exactly the layer shapes of Qwen2.5-7B (hidden 3584, 28 heads, 4 KV heads, FFN 18944).
    "qwen/qwen-2-7b": "qwen2.5-7b",
    "qwen/qwen2-7b": "qwen2.5-7b",
    "qwen/qwen2.5-7b": "qwen2.5-7b",
    "qwen/qwen2.5-72b": "qwen2.5-72b",
}


def device_id(vidur_name: str) -> str:
    """Catalog id of a Vidur device or network-node folder name (`a100_pairwise_nvlink` -> `a100-80gb`)."""
    short = vidur_name.lower().split("_")[0]
    return VIDUR_DEVICES.get(short, short)


def model_id(vidur_name: str) -> str:
    """Catalog id of a Vidur model folder (`meta-llama/Llama-2-7b-hf` -> `llama-2-7b`); unknown
    names become their lowercased last path part."""
    key = vidur_name.lower().strip("/")
    return VIDUR_MODELS.get(key, key.split("/")[-1])
