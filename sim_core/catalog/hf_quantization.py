"""A `config.json` quantization block -> the weight formats of a ModelSpec.

| quant_method                   | read as                                                            |
|--------------------------------|--------------------------------------------------------------------|
| fp8                            | fp8, per-tensor or block-wise (`weight_block_size`, DeepSeek-V3)   |
| compressed-tensors             | each config group's `weights`: 8-bit float -> fp8, 4-bit float ->  |
|                                | fp4 (per-channel, per-tensor or block: the same bytes per value)   |
| mxfp4                          | fp4 (gpt-oss: the experts)                                         |
| modelopt                       | quant_algo FP8 -> fp8, NVFP4 -> fp4                                |

Layers a config leaves in 16-bit (`ignore`, `ignored_layers`, `modules_to_not_convert`,
`exclude_modules`): the LM head, embeddings, routers and any vision tower are 16-bit in the byte
count anyway; attention projections left out make `attention_weight_dtype` 16-bit (Llama-4-Scout
FP8, gpt-oss); an MLP or expert layer left out is not modelled and refused by name. Scale
factors are not counted (precision.py). `kv_cache_scheme` does not set the KV format: that is
`cluster.kv_cache_dtype`, as vLLM's `--kv-cache-dtype` is.
"""

from __future__ import annotations

from typing import Any

from sim_core.errors import ConfigError

QUANT_KEYS = frozenset({"quantization_config", "compression_config"})
SKIP_LIST_KEYS = ("ignore", "ignored_layers", "modules_to_not_convert", "exclude_modules")
SIXTEEN_BIT_ANYWAY = ("lm_head", "embed", "router", "vision", "multi_modal_projector", "patch_embedding", "norm")
ATTENTION_PARTS = ("self_attn", "attention", "q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj")


def weight_formats(config: dict[str, Any], source: str) -> dict[str, Any]:
    """weight_dtype (and attention_weight_dtype when attention stays 16-bit) of the block."""
    quant = config.get("quantization_config", config.get("compression_config"))
    if quant is None:
        return {}
    if not isinstance(quant, dict):
        raise ConfigError(f"{source}: quantization_config: expected an object")
    fields = {"weight_dtype": _method_dtype(quant, source)}
    if any(_skips_attention(entry, source) for entry in _skip_list(quant)):
        fields["attention_weight_dtype"] = "bf16"
    return fields


def _method_dtype(quant: dict[str, Any], source: str) -> str:
    method = str(quant.get("quant_method", "")).lower()
    if method == "fp8":
        return "fp8"
    if method == "mxfp4":
        return "fp4"
    if method == "modelopt":
        algo = str(quant.get("quant_algo", "")).upper()
        if algo in ("FP8", "NVFP4"):
            return "fp8" if algo == "FP8" else "fp4"
        raise ConfigError(f"{source}: quantization_config.quant_algo: '{algo[:40]}' is not modelled (FP8, NVFP4 are)")
    if method == "compressed-tensors":
        return _compressed_tensors_dtype(quant, source)
    raise ConfigError(f"{source}: quantization_config.quant_method: '{method[:40]}' is not modelled "
                      "(fp8, compressed-tensors FP8/FP4, mxfp4, modelopt are)")


def _compressed_tensors_dtype(quant: dict[str, Any], source: str) -> str:
    groups = quant.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise ConfigError(f"{source}: quantization_config.config_groups: expected at least one group")
    found = set()
    for name, group in groups.items():
        weights = group.get("weights") if isinstance(group, dict) else None
        bits, kind = (weights or {}).get("num_bits"), (weights or {}).get("type")
        if (bits, kind) not in ((8, "float"), (4, "float")):
            raise ConfigError(f"{source}: quantization_config.config_groups.{str(name)[:40]}.weights: "
                              f"{bits}-bit {kind} weights are not modelled (8-bit and 4-bit float are)")
        found.add("fp8" if bits == 8 else "fp4")
    if len(found) > 1:
        raise ConfigError(f"{source}: quantization_config.config_groups: groups of mixed formats are not modelled")
    return found.pop()


def _skip_list(quant: dict[str, Any]) -> list[str]:
    entries: list[str] = []
    for key in SKIP_LIST_KEYS:
        value = quant.get(key)
        if isinstance(value, list):
            entries += [str(entry) for entry in value]
    return entries


def _skips_attention(entry: str, source: str) -> bool:
    """Whether a left-out layer is an attention projection; a left-out MLP is refused."""
    name = entry.removeprefix("re:")
    if any(part in name for part in SIXTEEN_BIT_ANYWAY) or name.endswith(".gate"):   # a MoE router: `mlp.gate`
        return False
    if any(part in name for part in ATTENTION_PARTS):
        return True
    raise ConfigError(f"{source}: quantization_config: '{entry[:80]}' is left unquantized; only attention, "
                      "embeddings, LM head, routers and vision layers left out are modelled")
