"""Build a ModelSpec from a Hugging Face `config.json` (dense, GQA/MQA or MoE).

Key names differ between architectures; each field is read from the first key present:

| ModelSpec field          | config.json keys (first found wins)                               |
|--------------------------|-------------------------------------------------------------------|
| embedding_dim            | hidden_size, n_embd, d_model                                      |
| num_layers               | num_hidden_layers, n_layer, num_layers                            |
| num_q_heads              | num_attention_heads, n_head                                       |
| num_kv_heads             | num_key_value_heads, num_kv_heads (multi_query: 1; else q heads)  |
| mlp_hidden_dim           | moe_intermediate_size (MoE), intermediate_size, n_inner, ffn_dim  |
| num_experts              | num_local_experts, num_experts, n_routed_experts (else 1)         |
| num_experts_per_token    | num_experts_per_tok, moe_top_k (else 1)                           |
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sim_core.catalog.models import ModelSpec
from sim_core.errors import ConfigError

MAX_CONFIG_BYTES = 1_000_000
# Architectures whose MLP is a plain up -> activation -> down (2 matrices), not SwiGLU/GeGLU.
UNGATED_TYPES = {"gpt2", "gpt_neox", "gptj", "phi", "opt", "falcon", "bloom", "starcoder2", "gpt_bigcode", "mpt"}


def _first(config: dict, keys: tuple[str, ...], source: str, default: object = None) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    if default is None:
        raise ConfigError(f"{source}: missing '{keys[0]}' (also looked for {', '.join(keys[1:]) or 'nothing else'})")
    return default


def model_from_hf_config(config: dict, source: str = "config.json", name: str | None = None) -> ModelSpec:
    """The ModelSpec described by a parsed `config.json` mapping (does not touch files).

    Raises:
        ConfigError: a needed key is missing or the values do not form a valid model.
    """
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the top level must be a JSON object")
    heads = _first(config, ("num_attention_heads", "n_head"), source)
    kv_default = 1 if config.get("multi_query") else heads
    experts = _first(config, ("num_local_experts", "num_experts", "n_routed_experts"), source, 1)
    hidden = _first(config, ("hidden_size", "n_embd", "d_model"), source)
    ffn_keys = ("intermediate_size", "n_inner", "ffn_dim")
    fields = {
        "name": name or str(config.get("_name_or_path") or (config.get("architectures") or [source])[0]),
        "num_layers": _first(config, ("num_hidden_layers", "n_layer", "num_layers"), source),
        "num_q_heads": heads,
        "num_kv_heads": _first(config, ("num_key_value_heads", "num_kv_heads"), source, kv_default),
        "embedding_dim": hidden,
        "head_dim": config.get("head_dim"),          # None: hidden // heads (Mistral-Nemo, Qwen3 set their own)
        "mlp_hidden_dim": _first(config, (("moe_intermediate_size",) if experts > 1 else ()) + ffn_keys,
                                 source, 4 * hidden),
        "use_gated_mlp": str(config.get("model_type", "")).lower() not in UNGATED_TYPES,
        "vocab_size": _first(config, ("vocab_size",), source),
        "max_position_embeddings": _first(config, ("max_position_embeddings", "n_positions", "seq_length"),
                                          source, 4096),
        "tie_word_embeddings": bool(config.get("tie_word_embeddings", False)),
        "num_experts": experts,
        "num_experts_per_token": _first(config, ("num_experts_per_tok", "moe_top_k"), source, 1),
    }
    try:
        return ModelSpec(**fields)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(map(str, problem["loc"])) or "model"
        raise ConfigError(f"{source}: {where}: {problem['msg'].removeprefix('Value error, ')}") from None


def load_hf_config(path: str | Path, name: str | None = None) -> ModelSpec:
    """Read a `config.json` file and build its ModelSpec.

    Raises:
        ConfigError: missing, too large, not JSON, or not a usable model config.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes; not a model config.json")
    return parse_hf_config(path.read_bytes(), str(path), name)


def parse_hf_config(data: bytes | str, source: str = "config.json", name: str | None = None) -> ModelSpec:
    """Build a ModelSpec from the bytes of a `config.json` (e.g. an upload)."""
    try:
        config = json.loads(data)
    except (ValueError, RecursionError) as exc:   # also: too deep, an integer over Python's digit limit
        raise ConfigError(f"{source}: not valid JSON ({exc})") from None
    return model_from_hf_config(config, source, name)
