"""Which layers of a Hugging Face model are local or global, dense or MoE, and its MLA dims.

Each function reads the keys of one feature from a text config (a `config.json`, or its
`text_config` for multimodal models), returns ModelSpec fields and names the keys it read in
`*_KEYS`. The layer rules are those of transformers' configuration classes and vLLM 0.33's
model files:

Local attention (layer i, 0-based, is local when):

  layer_types                         its entry is "sliding_attention" or "chunked_attention"
  Llama-4: attention_chunk_size,      no_rope_layers[i] = 1 (chunked); without the list,
    no_rope_layers                      (i + 1) % no_rope_layer_interval != 0 (default 4)
  Gemma 2 / 3: sliding_window         (i + 1) % sliding_window_pattern != 0 (default 2 / 6)
  Qwen2/3: use_sliding_window         i >= max_window_layers, only when use_sliding_window
  others (Mistral): sliding_window    always

MoE layers (layer i has experts when; the others have a dense MLP):

  Llama-4: interleave_moe_layer_step  (i + 1) % step == 0 (or i in moe_layers)
  DeepSeek: first_k_dense_replace,    i >= k and i % moe_layer_freq == 0
  Qwen-MoE: decoder_sparse_step       (i + 1) % step == 0 and i not in mlp_only_layers

Shared experts: n_shared_experts x moe_intermediate_size (DeepSeek), shared_expert_intermediate_size
(Qwen2-MoE), intermediate_size (Llama-4: one shared expert the size of a routed one). The dense
layers' MLP: intermediate_size_mlp (Llama-4), else intermediate_size. MLA: kv_lora_rank,
q_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim (qk_head_dim, when given, must be
nope + rope; head_dim is ignored for MLA, as vLLM does).
"""

from __future__ import annotations

from typing import Any

from sim_core.errors import ConfigError

WINDOW_KEYS = frozenset({"layer_types", "sliding_window", "sliding_window_size", "sliding_window_pattern",
                         "use_sliding_window", "max_window_layers", "attention_chunk_size", "no_rope_layers",
                         "no_rope_layer_interval"})
MOE_KEYS = frozenset({"num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
                      "experts_per_token", "moe_top_k", "moe_intermediate_size", "intermediate_size_mlp",
                      "shared_expert_intermediate_size", "n_shared_experts", "first_k_dense_replace",
                      "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers", "interleave_moe_layer_step",
                      "moe_layers"})
MLA_KEYS = frozenset({"kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
                      "qk_head_dim"})
LOCAL_TYPES = {"sliding_attention": "sliding", "chunked_attention": "chunked"}
GEMMA_PATTERNS = {"gemma2": 2, "gemma3_text": 6, "gemma3": 6}


def attention_window(text: dict[str, Any], num_layers: int, source: str) -> dict[str, Any]:
    """attention_window, its kind and full_attention_layers ({} when every layer is global)."""
    model_type = str(text.get("model_type", ""))
    kinds = _layer_kinds(text, model_type, num_layers, source)
    local = [kind for kind in kinds if kind != "full"]
    if not local:
        return {}
    if len(set(local)) > 1:
        raise ConfigError(f"{source}: layer_types: sliding and chunked local layers in one model are not modelled")
    kind = local[0]
    window = text.get("attention_chunk_size") if kind == "chunked" else _sliding_window(text)
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        key = "attention_chunk_size" if kind == "chunked" else "sliding_window"
        raise ConfigError(f"{source}: {key}: local-attention layers need a positive window, got {window!r}")
    return {"attention_window": window, "attention_window_kind": kind,
            "full_attention_layers": tuple(i for i, k in enumerate(kinds) if k == "full")}


def _layer_kinds(text: dict[str, Any], model_type: str, num_layers: int, source: str) -> list[str]:
    """'full', 'sliding' or 'chunked' per layer."""
    if model_type.startswith("llama4"):
        return _llama4_kinds(text, num_layers, source)
    if text.get("layer_types") is not None:
        return _listed_kinds(text["layer_types"], num_layers, source)
    window = _sliding_window(text)
    if window is None:
        return ["full"] * num_layers
    if "use_sliding_window" in text or model_type.startswith("qwen"):
        first_local = _int(text, "max_window_layers", source, 0)
        used = bool(text.get("use_sliding_window"))
        return ["sliding" if used and i >= first_local else "full" for i in range(num_layers)]
    if model_type in GEMMA_PATTERNS:
        pattern = _int(text, "sliding_window_pattern", source, GEMMA_PATTERNS[model_type])
        return ["sliding" if (i + 1) % pattern else "full" for i in range(num_layers)]
    return ["sliding"] * num_layers


def _sliding_window(text: dict[str, Any]) -> Any:
    """The window of sliding layers (Gemma 2 repeats it as sliding_window_size)."""
    return text["sliding_window"] if text.get("sliding_window") is not None else text.get("sliding_window_size")


def _llama4_kinds(text: dict[str, Any], num_layers: int, source: str) -> list[str]:
    if text.get("layer_types") is not None:
        return _listed_kinds(text["layer_types"], num_layers, source)
    if text.get("attention_chunk_size") is None:
        return ["full"] * num_layers
    rope = text.get("no_rope_layers")
    if not rope:
        interval = _int(text, "no_rope_layer_interval", source, 4)
        rope = [int((i + 1) % interval != 0) for i in range(num_layers)]
    if not isinstance(rope, list) or len(rope) != num_layers:
        raise ConfigError(f"{source}: no_rope_layers: needs one entry per layer ({num_layers})")
    return ["chunked" if flag else "full" for flag in rope]


def _listed_kinds(layer_types: object, num_layers: int, source: str) -> list[str]:
    if not isinstance(layer_types, list) or len(layer_types) != num_layers:
        raise ConfigError(f"{source}: layer_types: needs one entry per layer ({num_layers})")
    kinds = []
    for entry in layer_types:
        if entry != "full_attention" and entry not in LOCAL_TYPES:
            raise ConfigError(f"{source}: layer_types: '{str(entry)[:60]}' layers are not modelled "
                              f"(full_attention, {', '.join(LOCAL_TYPES)} are)")
        kinds.append(LOCAL_TYPES.get(entry, "full"))
    return kinds


def moe_layout(text: dict[str, Any], num_layers: int, source: str) -> dict[str, Any]:
    """MoE fields: experts, top-k, the expert and shared-expert sizes, the dense layers."""
    experts = _first_int(text, ("num_local_experts", "num_experts", "n_routed_experts"), source, 1)
    top_k = _first_int(text, ("num_experts_per_tok", "experts_per_token", "moe_top_k"), source, 1)
    if experts <= 1:
        return {"num_experts": 1, "num_experts_per_token": 1}
    expert_dim = _first_int(text, ("moe_intermediate_size", "intermediate_size"), source, 0)
    dense = _dense_layers(text, num_layers, source)
    fields: dict[str, Any] = {"num_experts": experts, "num_experts_per_token": top_k, "mlp_hidden_dim": expert_dim,
                              "shared_expert_dim": _shared_expert_dim(text, expert_dim, source)}
    if dense:
        fields["dense_layers"] = dense
        fields["dense_mlp_dim"] = _first_int(text, ("intermediate_size_mlp", "intermediate_size"), source, 0)
    return fields


def _dense_layers(text: dict[str, Any], num_layers: int, source: str) -> tuple[int, ...]:
    if str(text.get("model_type", "")).startswith("llama4"):
        moe = text.get("moe_layers")
        if moe is None:
            step = _int(text, "interleave_moe_layer_step", source, 1)
            moe = [i for i in range(num_layers) if step > 0 and (i + 1) % step == 0]
        return tuple(i for i in range(num_layers) if i not in set(moe))
    if "first_k_dense_replace" in text or "moe_layer_freq" in text:
        first, freq = _int(text, "first_k_dense_replace", source, 0), _int(text, "moe_layer_freq", source, 1)
        return tuple(i for i in range(num_layers) if i < first or i % freq)
    step = _int(text, "decoder_sparse_step", source, 1)
    only_mlp = set(text.get("mlp_only_layers") or [])
    return tuple(i for i in range(num_layers) if i in only_mlp or (i + 1) % step)


def _shared_expert_dim(text: dict[str, Any], expert_dim: int, source: str) -> int:
    if str(text.get("model_type", "")).startswith("llama4"):
        return _int(text, "intermediate_size", source, 0)
    if text.get("n_shared_experts"):
        return _int(text, "n_shared_experts", source, 0) * expert_dim
    return _int(text, "shared_expert_intermediate_size", source, 0)


def mla_dims(text: dict[str, Any], source: str) -> dict[str, Any]:
    """MLA fields and the head_dim they imply ({} for ordinary attention)."""
    if not text.get("kv_lora_rank"):
        return {}
    dims = {key: _int(text, key, source, 0) for key in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
                                                      "v_head_dim", "q_lora_rank")}
    head_dim = dims["qk_nope_head_dim"] + dims["qk_rope_head_dim"]
    if text.get("qk_head_dim") not in (None, head_dim):
        raise ConfigError(f"{source}: qk_head_dim: {text['qk_head_dim']} is not qk_nope_head_dim + qk_rope_head_dim "
                          f"({head_dim})")
    return {**dims, "head_dim": head_dim}


def _first_int(text: dict[str, Any], keys: tuple[str, ...], source: str, default: int) -> int:
    key = next((k for k in keys if text.get(k) is not None), None)
    return default if key is None else _int(text, key, source, default)


def _int(text: dict[str, Any], key: str, source: str, default: int) -> int:
    value = text.get(key)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{source}: {key}: expected a non-negative integer, got {str(value)[:60]!r}")
    return value
