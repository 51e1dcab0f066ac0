"""Build a ModelSpec from a Hugging Face `config.json`, exactly or not at all.

Key names differ between architectures; each field is read from the first key present:

| ModelSpec field          | config.json keys (first found wins)                               |
|--------------------------|-------------------------------------------------------------------|
| embedding_dim            | hidden_size, n_embd, d_model                                      |
| num_layers               | num_hidden_layers, n_layer, num_layers                            |
| num_q_heads              | num_attention_heads, n_head                                       |
| num_kv_heads             | num_key_value_heads, num_kv_heads (multi_query: 1; else q heads)  |
| head_dim                 | head_dim (else hidden / heads; MLA: qk_nope + qk_rope)            |
| mlp_hidden_dim           | moe_intermediate_size (MoE), intermediate_size, n_inner, ffn_dim  |
| vocab_size               | vocab_size                                                        |
| max_position_embeddings  | max_position_embeddings, n_positions, seq_length                  |
| tie_word_embeddings      | tie_word_embeddings (Gemma: true when absent)                     |

Local attention, MoE layouts and MLA: hf_layouts.py; the quantization block:
hf_quantization.py. A multimodal config (Llama-4, Gemma-3) is read from its `text_config`, its
`vision_config` counted as `encoder_params`. Every other key must be one of the reviewed harmless
keys (hf_keys.py): a key that may change shapes or memory is refused by name, never ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sim_core.catalog.hf_keys import HARMLESS_KEYS
from sim_core.catalog.hf_layouts import MLA_KEYS, MOE_KEYS, WINDOW_KEYS, attention_window, mla_dims, moe_layout
from sim_core.catalog.hf_quantization import QUANT_KEYS, weight_formats
from sim_core.catalog.models import ModelSpec
from sim_core.errors import ConfigError

MAX_CONFIG_BYTES = 1_000_000
# Architectures whose MLP is a plain up -> activation -> down (2 matrices), not SwiGLU/GeGLU.
UNGATED_TYPES = {"gpt2", "gpt_neox", "gptj", "phi", "opt", "falcon", "bloom", "starcoder2", "gpt_bigcode", "mpt"}
# Defaults of transformers' configuration classes for keys the hub's configs leave out.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {"vocab_size": 262_208, "max_position_embeddings": 131_072, "tie_word_embeddings": True},
    "gemma2": {"tie_word_embeddings": True},
    "gemma": {"tie_word_embeddings": True},
}
SHAPE_KEYS = frozenset({"hidden_size", "n_embd", "d_model", "num_hidden_layers", "n_layer", "num_layers",
                        "num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads", "multi_query",
                        "head_dim", "intermediate_size", "n_inner", "ffn_dim", "vocab_size",
                        "max_position_embeddings", "n_positions", "seq_length", "tie_word_embeddings"})
WRAPPER_KEYS = frozenset({"text_config", "vision_config"})
KNOWN_KEYS = SHAPE_KEYS | WINDOW_KEYS | MOE_KEYS | MLA_KEYS | QUANT_KEYS | WRAPPER_KEYS | HARMLESS_KEYS


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
        ConfigError: a needed key is missing, a key that may change the shapes is not modelled,
            or the values do not form a valid model.
    """
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: the top level must be a JSON object")
    text = _text_config(config, source)
    fields = {
        "name": name or str(config.get("_name_or_path") or (config.get("architectures") or [source])[0]),
        **_base_fields(text, source),
        **weight_formats(config, source),
        "encoder_params": _encoder_params(config.get("vision_config"), text, source),
    }
    layers = fields["num_layers"]
    if isinstance(layers, int) and not isinstance(layers, bool) and 0 < layers <= 1000:
        fields.update(attention_window(text, layers, source))
        fields.update(moe_layout(text, layers, source))
        fields.update(mla_dims(text, source))
    try:
        return ModelSpec(**fields)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(map(str, problem["loc"])) or "model"
        raise ConfigError(f"{source}: {where}: {problem['msg'].removeprefix('Value error, ')}") from None


def _text_config(config: dict[str, Any], source: str) -> dict[str, Any]:
    """The language model's keys (a multimodal config's `text_config`) with family defaults,
    after refusing keys that are neither read nor reviewed harmless."""
    _refuse_unknown_keys(config, source)
    text = config.get("text_config")
    if text is None:
        text = config
    elif not isinstance(text, dict):
        raise ConfigError(f"{source}: text_config: expected an object")
    else:
        _refuse_unknown_keys(text, f"{source}: text_config")
        text = {**{k: config[k] for k in ("tie_word_embeddings",) if k in config}, **text}
    defaults = FAMILY_DEFAULTS.get(str(text.get("model_type", "")), {})
    return {**defaults, **{k: v for k, v in text.items() if v is not None}}


def _refuse_unknown_keys(config: dict[str, Any], source: str) -> None:
    unknown = [key for key, value in config.items()
               if key not in KNOWN_KEYS and not key.startswith("_") and value is not None and value is not False]
    if unknown:
        raise ConfigError(f"{source}: unknown key{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(repr(k[:60]) for k in unknown[:5])}: it may change the model's shapes "
                          "or memory, which the import would then get wrong; remove it if it does not, or "
                          "describe the model under `models:` by its fields")


def _base_fields(text: dict[str, Any], source: str) -> dict[str, Any]:
    heads = _first(text, ("num_attention_heads", "n_head"), source)
    hidden = _first(text, ("hidden_size", "n_embd", "d_model"), source)
    return {
        "num_layers": _first(text, ("num_hidden_layers", "n_layer", "num_layers"), source),
        "num_q_heads": heads,
        "num_kv_heads": _first(text, ("num_key_value_heads", "num_kv_heads"), source,
                               1 if text.get("multi_query") else heads),
        "embedding_dim": hidden,
        "head_dim": text.get("head_dim"),          # None: hidden // heads (Mistral-Nemo, Qwen3 set their own)
        "mlp_hidden_dim": _first(text, ("intermediate_size", "n_inner", "ffn_dim"), source, 4 * hidden),
        "use_gated_mlp": str(text.get("model_type", "")).lower() not in UNGATED_TYPES,
        "vocab_size": _first(text, ("vocab_size",), source),
        "max_position_embeddings": _first(text, ("max_position_embeddings", "n_positions", "seq_length"),
                                          source, 4096),
        "tie_word_embeddings": bool(text.get("tie_word_embeddings", False)),
    }


def _encoder_params(vision: object, text: dict[str, Any], source: str) -> int:
    """Parameters of a ViT vision tower and its projector, estimated from `vision_config`:
    layers x (4 h^2 attention + 2 h i MLP) + patch and position embeddings + a projection of
    its output (vision_output_dim, else h) to the text hidden size, + Llama-4's pixel-shuffle
    adapter (h / ratio^2 -> projector_input_dim -> projector_output_dim) when named. Against
    transformers' own count: Gemma-3's SigLIP 422,659,584 of 423,060,336; Llama-4's 871,301,632
    of 871,932,416 (biases, norms and class tokens left out)."""
    if vision is None:
        return 0
    if not isinstance(vision, dict):
        raise ConfigError(f"{source}: vision_config: expected an object")
    try:
        h, i, layers = int(vision["hidden_size"]), int(vision["intermediate_size"]), int(vision["num_hidden_layers"])
        patch, image = int(vision.get("patch_size", 14)), int(vision.get("image_size", 224))
        out = int(vision.get("vision_output_dim") or h)
        hidden = int(text.get("hidden_size", 0))
        adapter_in, adapter_out = int(vision.get("projector_input_dim", 0)), int(vision.get("projector_output_dim", 0))
        shuffled = round(h / float(vision.get("pixel_shuffle_ratio", 1.0)) ** 2)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise ConfigError(f"{source}: vision_config: needs integer hidden_size, intermediate_size and "
                          f"num_hidden_layers ({exc.__class__.__name__}: {str(exc)[:60]})") from None
    positions = (image // max(patch, 1)) ** 2
    adapter = shuffled * adapter_in + adapter_in * adapter_out if adapter_in and adapter_out else 0
    return layers * (4 * h * h + 2 * h * i) + 3 * patch * patch * h + positions * h + out * hidden + adapter


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
