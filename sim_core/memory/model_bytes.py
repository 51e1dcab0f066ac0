"""Bytes a model occupies on one GPU: its weights per pipeline stage and its KV cache per token.

The one place that turns a ModelSpec's shape and number formats into bytes; the planners, the
P/D hand-off and the swap space all size memory from here.

KV cache per token and layer on one GPU:

    standard attention   2 (K and V) x head_dim x ceil(kv_heads / TP) x the KV format's bytes
    MLA (DeepSeek)       (kv_lora_rank + qk_rope_head_dim) x bytes: one latent, not per-head K/V,
                         and the same on every TP rank (vLLM replicates it: one "KV head")

Local-attention layers store the same per token; what they change is how many tokens a request
keeps (`request_kv_bytes`, `local_kv_capped`). `docs/design/model-shapes.md` says when vLLM 0.33
frees a local layer's blocks outside its window.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from sim_core.catalog.models import ModelSpec
from sim_core.catalog.moe_layout import MoeLayout
from sim_core.catalog.precision import DTYPE_BYTES


def kv_bytes_per_token_layer(model: ModelSpec, kv_dtype: str, tp: int = 1) -> float:
    """KV bytes of one token in one layer on one GPU (every layer has the same)."""
    if model.is_mla:
        return (model.kv_lora_rank + model.qk_rope_head_dim) * DTYPE_BYTES[kv_dtype]
    return 2 * model.head_dim * ceil(model.num_kv_heads / tp) * DTYPE_BYTES[kv_dtype]


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str, tp: int = 1, layers: int | None = None) -> float:
    """KV bytes of one token on one GPU over `layers` layers (default: all), each storing it:
    what every layer costs while the context is within the attention window, and what local
    layers cost in vLLM without its hybrid allocator. Standard attention: K and V, head_dim x the
    GPU's KV heads (a head is replicated when TP exceeds the KV heads) x the KV format's bytes."""
    if model.is_mla:
        return kv_bytes_per_token_layer(model, kv_dtype, tp) * (model.num_layers if layers is None else layers)
    kv_heads = ceil(model.num_kv_heads / tp)
    return 2 * model.head_dim * kv_heads * (model.num_layers if layers is None else layers) * DTYPE_BYTES[kv_dtype]


def local_kv_capped(model: ModelSpec, hybrid_allocator: bool | None = None) -> bool:
    """Whether vLLM 0.33 keeps only the window's tokens in the model's local layers: always when
    every layer is local (one KV spec, nothing to unify), else only with its hybrid KV-cache
    allocator on. `hybrid_allocator` None is vLLM's default: on, except for chunked local
    attention (Llama-4); a KV connector without hybrid support also turns it off
    (vllm/config/vllm.py, v1/core/kv_cache_planning.py)."""
    if model.attention_window is None:
        return False
    if not model.full_attention_layers:
        return True
    if hybrid_allocator is None:
        return model.attention_window_kind == "sliding"
    return hybrid_allocator


@dataclass(frozen=True)
class KvCacheGroups:
    """vLLM 0.33's KV-cache groups: every group has `layers_per_group` layers (padded), and one
    block of its pool holds `block_size` tokens of that many layers; a request takes blocks for
    each full group by its length and for each local group at most the window's."""

    layers_per_group: int
    full_groups: int
    local_groups: int


def kv_cache_groups(model: ModelSpec, hybrid_allocator: bool | None = None) -> KvCacheGroups:
    """How vLLM 0.33 groups the model's layers (v1/core/kv_cache_planning.py,
    _get_kv_cache_groups_uniform_page_size): one group of all layers when every layer has the
    same spec (no window, all local, or local promoted to full with the hybrid allocator off);
    else groups the size of the rarer attention type (of the commoner one when it is under 1.5x
    as many), the commoner type's last group padded."""
    local = sum(1 for i in range(model.num_layers) if model.is_local_layer(i))
    full = model.num_layers - local
    if not full:
        return KvCacheGroups(model.num_layers, 0, 1)
    if not local or not local_kv_capped(model, hybrid_allocator):     # local layers promoted to full
        return KvCacheGroups(model.num_layers, 1, 0)
    size = max(full, local) if max(full, local) < 1.5 * min(full, local) else min(full, local)
    return KvCacheGroups(size, ceil(full / size), ceil(local / size))


def request_kv_bytes(model: ModelSpec, kv_dtype: str, tokens: int, tp: int = 1,
                     layers: range | None = None, hybrid_allocator: bool | None = None) -> float:
    """KV bytes one request of `tokens` tokens holds on one GPU over `layers` (default: all):
    full-attention layers every token, local layers at most the window's when capped
    (`local_kv_capped`; rounding to blocks is the caller's)."""
    per_layer = kv_bytes_per_token_layer(model, kv_dtype, tp)
    layers = range(model.num_layers) if layers is None else layers
    capped = local_kv_capped(model, hybrid_allocator)
    window = model.attention_window or tokens
    return sum(per_layer * (min(tokens, window) if capped and model.is_local_layer(i) else tokens) for i in layers)


def stage_weight_bytes(model: ModelSpec, tp: int, pp: int, stage: int, layout: MoeLayout | None = None) -> float:
    """Weight bytes on one GPU of pipeline stage `stage` (TP-sharded). Linear layers are stored in
    the model's weight format (attention in attention_weight_dtype when the quantization left it
    out); embeddings, LM head, norms, routers and a vision encoder stay 16-bit (as quantized
    checkpoints keep them). The vision encoder sits on the first stage. `layout` (MoE models with
    EP or DP > 1): the routed experts' weights are split over the EP GPUs (whole experts) or, without
    EP, over the DP x TP group; everything else stays split by TP (docs/design/moe-parallelism.md)."""
    other_bytes = DTYPE_BYTES["bf16"]
    layers = model.stage_layers(pp, stage)
    moe_layers = sum(1 for i in layers if model.is_moe_layer(i))
    if layout is not None and not layout.trivial and model.is_moe:
        total = moe_layers * _expert_parallel_layer_bytes(model, layout)
    else:
        total = moe_layers * _layer_bytes(model, tp, moe=model.is_moe)
    if len(layers) > moe_layers:
        total += (len(layers) - moe_layers) * _layer_bytes(model, tp, moe=False)
    if stage == 0:
        total += (model.vocab_size * model.embedding_dim + model.encoder_params) / tp * other_bytes
    if stage == pp - 1:
        e = model.embedding_dim
        total += (e + (0 if model.tie_word_embeddings and pp == 1 else model.vocab_size * e / tp)) * other_bytes
    return total


def _layer_bytes(model: ModelSpec, tp: int, moe: bool) -> float:
    """One layer's bytes on one GPU: its linear layers in their formats, its norms and router in 16-bit."""
    e = model.embedding_dim
    gated = 3 if model.use_gated_mlp else 2
    if moe:
        mlp = gated * e * model.mlp_hidden_dim * model.num_experts + gated * e * model.shared_expert_dim
        router = e * model.num_experts if model.is_moe else 0
    else:
        mlp = gated * e * (model.dense_mlp_dim or model.mlp_hidden_dim) if model.is_moe else \
            gated * e * model.mlp_hidden_dim * model.num_experts
        router = 0
    sharded, replicated, norms = _attention_params(model)
    linear_bytes, other_bytes = DTYPE_BYTES[model.weight_dtype], DTYPE_BYTES["bf16"]
    attention_bytes = DTYPE_BYTES[model.attention_weight_dtype or model.weight_dtype]
    if attention_bytes == linear_bytes and not replicated:     # the arithmetic of uniform models, kept bit for bit
        linear = (sharded + mlp) / tp * linear_bytes
    else:
        linear = (sharded / tp + replicated) * attention_bytes + mlp / tp * linear_bytes
    return linear + (router + 2 * e + norms) * other_bytes    # two norms, replicated


def _expert_parallel_layer_bytes(model: ModelSpec, layout: MoeLayout) -> float:
    """One MoE layer's bytes on one GPU under `layout`: the routed experts over EP x (the expert
    split), i.e. num_experts / EP whole experts, or a 1 / (DP x TP) slice of each; attention and
    the shared expert by TP; norms and router 16-bit, replicated."""
    e, tp = model.embedding_dim, layout.tp
    gated = 3 if model.use_gated_mlp else 2
    experts = gated * e * model.mlp_hidden_dim * model.num_experts / (layout.ep * layout.expert_split)
    shared = gated * e * model.shared_expert_dim / tp
    sharded, replicated, norms = _attention_params(model)
    linear_bytes, other_bytes = DTYPE_BYTES[model.weight_dtype], DTYPE_BYTES["bf16"]
    attention_bytes = DTYPE_BYTES[model.attention_weight_dtype or model.weight_dtype]
    linear = (sharded / tp + replicated) * attention_bytes + (experts + shared) * linear_bytes
    return linear + (e * model.num_experts + 2 * e + norms) * other_bytes


def _attention_params(model: ModelSpec) -> tuple[int, int, int]:
    """(TP-sharded, replicated, norm) parameters of one layer's attention. MLA (vLLM's
    deepseek_v2.py): the down-projections to the query and KV latents are replicated on every
    rank, the up-projections and the output projection are split by heads."""
    e, hd, q = model.embedding_dim, model.head_dim, model.num_q_heads
    if not model.is_mla:
        return e * hd * (q + 2 * model.num_kv_heads) + q * hd * e, 0, 0
    latent = model.kv_lora_rank + model.qk_rope_head_dim
    if model.q_lora_rank:
        replicated, q_up = e * (model.q_lora_rank + latent), model.q_lora_rank * q * hd
    else:
        replicated, q_up = e * latent, e * q * hd
    kv_up = model.kv_lora_rank * q * (model.qk_nope_head_dim + model.v_head_dim)
    out = q * model.v_head_dim * e
    return q_up + kv_up + out, replicated, model.kv_lora_rank + model.q_lora_rank
