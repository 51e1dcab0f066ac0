"""Bytes a model occupies on one GPU: its weights per pipeline stage and its KV cache per token.

The one place that turns a ModelSpec's shape and number formats into bytes; the planners, the
P/D hand-off and the swap space all size memory from here.
"""

from __future__ import annotations

from math import ceil

from sim_core.catalog.models import ModelSpec
from sim_core.catalog.precision import DTYPE_BYTES


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str, tp: int = 1, layers: int | None = None) -> float:
    """K and V bytes of one token on one GPU: head_dim x the GPU's KV heads (a head is replicated
    when TP exceeds the KV heads) x `layers` (default: all) x the KV format's bytes."""
    kv_heads = ceil(model.num_kv_heads / tp)
    return 2 * model.head_dim * kv_heads * (model.num_layers if layers is None else layers) * DTYPE_BYTES[kv_dtype]


def stage_weight_bytes(model: ModelSpec, tp: int, pp: int, stage: int) -> float:
    """Weight bytes on one GPU of pipeline stage `stage` (TP-sharded). Linear layers are stored in
    the model's weight format; embeddings, LM head, norms and routers stay 16-bit (as quantized
    checkpoints keep them)."""
    e, hd = model.embedding_dim, model.head_dim
    attention = e * hd * (model.num_q_heads + 2 * model.num_kv_heads) + model.num_q_heads * hd * e
    mlp = (3 if model.use_gated_mlp else 2) * e * model.mlp_hidden_dim * model.num_experts
    router = e * model.num_experts if model.is_moe else 0
    linear_bytes, other_bytes = DTYPE_BYTES[model.weight_dtype], DTYPE_BYTES["bf16"]
    per_layer = (attention + mlp) / tp * linear_bytes + (router + 2 * e) * other_bytes  # two norms, replicated
    total = per_layer * (model.num_layers // pp)
    if stage == 0:
        total += model.vocab_size * e / tp * other_bytes
    if stage == pp - 1:
        total += (e + (0 if model.tie_word_embeddings and pp == 1 else model.vocab_size * e / tp)) * other_bytes
    return total
