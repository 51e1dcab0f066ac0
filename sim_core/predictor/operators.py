"""FLOPs and bytes of each operator of a transformer layer (one kernel, one GPU, bf16).

Pure arithmetic on token counts; every function also accepts numpy arrays, so a predictor can
price a whole token grid at once. Names follow Vidur's profiling columns. `t` is the number of
tokens in the iteration, `tp` the tensor-parallel degree (weights and heads are split by it).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Any, TypeAlias

import numpy as np

from sim_core.catalog import ModelSpec

BYTES = 2  # one bf16 value

# A count, or a numpy grid of them: every function here takes both and its result follows its
# inputs (numpy broadcasting), which the checker cannot track through float | ndarray; hence Any.
Amount: TypeAlias = Any


@dataclass(frozen=True)
class Cost:
    """Work of one kernel: floating-point operations and bytes moved to or from device memory
    (every value 16-bit). A GEMM also says how many of the values it moves are weights and how
    many its input activations, which a quantized model stores narrower (roofline.Roofs.linear)."""

    flops: Amount
    bytes: Amount
    weight_values: Amount = 0
    input_values: Amount = 0


def gemm(m: Amount, k: Amount, n: Amount) -> Cost:
    """[m x k] @ [k x n]: 2mkn FLOPs; reads both operands once (the input m x k, the weights
    k x n) and writes the result."""
    return Cost(2 * m * k * n, BYTES * (k * n + m * k + m * n), weight_values=k * n, input_values=m * k)


def streaming(values_moved: Amount) -> Cost:
    """A memory-bound kernel (norm, add, activation, copy) that moves `values_moved` values."""
    return Cost(0 * values_moved, BYTES * values_moved)


@dataclass(frozen=True)
class LayerShape:
    """The per-GPU dimensions of one layer under tensor parallelism."""

    embedding_dim: int
    head_dim: int
    q_heads: int            # query heads on one GPU
    kv_heads: int           # KV heads on one GPU (replicated when TP exceeds them)
    ffn: float              # MLP intermediate size on one GPU (per expert)
    gate: int               # 2 for a gated MLP (gate and up matrices fused), else 1
    num_experts: int
    top_k: int

    @classmethod
    def of(cls, model: ModelSpec, tp: int) -> LayerShape:
        return cls(model.embedding_dim, model.head_dim, model.num_q_heads // tp, ceil(model.num_kv_heads / tp),
                   model.mlp_hidden_dim / tp, 2 if model.use_gated_mlp else 1, model.num_experts,
                   model.num_experts_per_token)


def layer_kernels(s: LayerShape, t: Amount) -> dict[str, Cost]:
    """Cost of ONE kernel of each token-dependent operator of a layer for `t` tokens
    (attention itself excluded: see prefill_attention and decode_attention)."""
    e, hd = s.embedding_dim, s.head_dim
    routed = t * s.top_k                                   # token-expert pairs
    active = np.minimum(routed, s.num_experts)          # experts whose weights are read
    up = s.ffn * s.gate
    kernels = {
        "attn_pre_proj": gemm(t, e, (s.q_heads + 2 * s.kv_heads) * hd),
        "attn_rope": streaming(2 * t * (s.q_heads + s.kv_heads) * hd),       # read and write q, k
        "attn_kv_cache_save": streaming(2 * 2 * t * s.kv_heads * hd),        # read k, v; write to cache
        "attn_post_proj": gemm(t, s.q_heads * hd, e),
        "mlp_up_proj": _experts(routed, active, e, up, s.num_experts),
        "mlp_act": streaming(routed * s.ffn * (s.gate + 1)),                # read gate (+up), write
        "mlp_down_proj": _experts(routed, active, s.ffn, e, s.num_experts),
        "input_layernorm": streaming(2 * t * e),
        "post_attention_layernorm": streaming(2 * t * e),
        "add": streaming(3 * t * e),                                         # read two, write one
    }
    if s.num_experts > 1:
        kernels["moe_router"] = gemm(t, e, s.num_experts)
    return kernels


def _experts(routed: Amount, active: Amount, k: float, n: float, num_experts: int) -> Cost:
    """Dense GEMM, or MoE experts: FLOPs for every routed token, weights of each active expert."""
    if num_experts == 1:
        return gemm(routed, k, n)
    return Cost(2 * routed * k * n, BYTES * (active * k * n + routed * (k + n)), weight_values=active * k * n,
                input_values=routed * k)


def prefill_attention(s: LayerShape, chunk: Amount, context: Amount) -> Cost:
    """Causal attention of `chunk` new tokens over `context` cached ones plus themselves: query i
    sees context + i + 1 keys; 4 x head_dim FLOPs per (query, key) pair and head (QK^T and PV)."""
    pairs = chunk * context + chunk * (chunk + 1) / 2
    flops = 4 * s.head_dim * s.q_heads * pairs
    moved = 2 * chunk * s.q_heads * s.head_dim + 2 * (context + chunk) * s.kv_heads * s.head_dim
    return Cost(flops, BYTES * moved)


def decode_attention(s: LayerShape, num_decodes: Amount, context: Amount) -> Cost:
    """One new token per request over `context` cached tokens in all: reads every cached K and V."""
    flops = 4 * s.head_dim * s.q_heads * context
    moved = 2 * context * s.kv_heads * s.head_dim + 2 * num_decodes * s.q_heads * s.head_dim
    return Cost(flops, BYTES * moved)


def embedding(embedding_dim: int, t: Amount) -> Cost:
    """Gather `t` embedding rows and write them out."""
    return streaming(2 * t * embedding_dim)


def lm_head(model: ModelSpec, tp: int, num_requests: Amount) -> Cost:
    """Logits of the last token of each request over the vocabulary shard of one GPU."""
    return gemm(num_requests, model.embedding_dim, model.vocab_size / tp)


def activation_bytes(embedding_dim: int, t: Amount) -> Amount:
    """Bytes of the hidden states of `t` tokens (what TP all-reduce and PP send/recv move)."""
    return BYTES * t * embedding_dim
