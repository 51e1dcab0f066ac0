"""FLOPs and bytes of each operator of a transformer layer (one kernel, one GPU, bf16).

Pure arithmetic on token counts; every function also accepts numpy arrays, so a predictor can
price a whole token grid at once. Names follow Vidur's profiling columns. `t` is the number of
tokens in the iteration, `tp` the tensor-parallel degree (weights and heads are split by it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import ceil
from typing import Any, TypeAlias

import numpy as np

from sim_core import portable_math as portable
from sim_core.catalog import ModelSpec
from sim_core.catalog.moe_layout import MoeLayout, expert_load_imbalance

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
    """The per-GPU dimensions of one layer under tensor parallelism.

    A model whose layers differ (local and global attention, dense and MoE MLPs) is priced as
    its average layer: each kernel's time weighted by the share of layers that run it
    (`kernel_share`), attention over the keys the average layer attends to. Exact for the
    whole model (PP = 1); with PP each stage is priced at the model's average layer.
    """

    embedding_dim: int
    head_dim: int
    q_heads: int            # query heads on one GPU
    kv_heads: int           # KV heads on one GPU (replicated when TP exceeds them; MLA: 1 latent)
    ffn: float              # MLP intermediate size on one GPU (per expert)
    gate: int               # 2 for a gated MLP (gate and up matrices fused), else 1
    num_experts: int
    top_k: int
    v_head_dim: int = 0     # value head (0: head_dim); MLA sets its own
    kv_values: float = 0.0  # values cached per token and layer on one GPU (0: 2 x kv_heads x head_dim)
    # MLA (0 = ordinary attention): latent = kv_lora_rank + rope, the cached values per token
    kv_lora_rank: int = 0
    latent: int = 0
    q_lora_rank: int = 0
    # local attention: the window and the share of layers that use it
    window: int = 0
    local_share: float = 0.0
    # MoE models with dense layers or a shared expert
    moe_share: float = 1.0          # share of layers whose MLP is the experts
    dense_ffn: float = 0.0          # dense layers' MLP intermediate size on one GPU
    shared_ffn: float = 0.0         # shared expert's intermediate size on one GPU
    # MoE layers over a DP x TP group (docs/design/moe-parallelism.md); 1, 1: TP only
    dp: int = 1                     # attention data-parallel ranks whose tokens meet in the experts
    ep: int = 1                     # expert-parallel GPUs (num_experts / ep whole experts each)
    load_imbalance: float = 0.0     # max / mean routed pairs per EP GPU (0: expert_load_imbalance)

    @classmethod
    def of(cls, model: ModelSpec, tp: int, layout: MoeLayout | None = None,
           load_imbalance: float | None = None) -> LayerShape:
        """The layer's per-GPU shape under TP (and, for MoE models, `layout`'s DP and EP: the
        expert intermediate size is then divided by layout.expert_split instead of TP)."""
        base = cls._of_tp(model, tp)
        if layout is None or layout.trivial or not model.is_moe:
            return base
        return replace(base, ffn=model.mlp_hidden_dim / layout.expert_split, dp=layout.dp, ep=layout.ep,
                       load_imbalance=load_imbalance or 0.0)

    @classmethod
    def _of_tp(cls, model: ModelSpec, tp: int) -> LayerShape:
        layers = model.num_layers
        local = sum(1 for i in range(layers) if model.is_local_layer(i)) / layers
        moe = sum(1 for i in range(layers) if model.is_moe_layer(i)) / layers if model.is_moe else 1.0
        mla: dict[str, Any] = {}
        if model.is_mla:
            latent = model.kv_lora_rank + model.qk_rope_head_dim
            mla = {"kv_heads": 1, "v_head_dim": model.v_head_dim, "kv_values": float(latent),
                   "kv_lora_rank": model.kv_lora_rank, "latent": latent, "q_lora_rank": model.q_lora_rank}
        base = cls(model.embedding_dim, model.head_dim, model.num_q_heads // tp, ceil(model.num_kv_heads / tp),
                   model.mlp_hidden_dim / tp, 2 if model.use_gated_mlp else 1, model.num_experts,
                   model.num_experts_per_token, window=model.attention_window or 0, local_share=local,
                   moe_share=moe, dense_ffn=(model.dense_mlp_dim or 0) / tp, shared_ffn=model.shared_expert_dim / tp)
        return replace(base, **mla) if mla else base

    @property
    def values_per_token(self) -> float:
        """Values the KV cache holds per token and layer on one GPU."""
        return self.kv_values or 2 * self.kv_heads * self.head_dim

    @property
    def value_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    def kernel_share(self, name: str) -> float:
        """The average number of layers' worth of `name` per layer (1 for uniform models)."""
        if name.startswith("dense_mlp_"):
            return 1.0 - self.moe_share
        if name.startswith(("mlp_", "shared_expert_")) or name == "moe_router":
            return self.moe_share if self.num_experts > 1 else 1.0
        return 1.0


def layer_kernels(s: LayerShape, t: Amount) -> dict[str, Cost]:
    """Cost of ONE kernel of each token-dependent operator of a layer for `t` tokens
    (attention itself excluded: see prefill_attention and decode_attention). MoE models: the
    experts are `mlp_*`, a shared expert `shared_expert_*`, the dense layers' MLP `dense_mlp_*`."""
    e, hd = s.embedding_dim, s.head_dim
    routed, active = expert_pairs(s, t)
    up = s.ffn * s.gate
    kernels = {
        "attn_pre_proj": _mla_projections(s, t) if s.latent else gemm(t, e, (s.q_heads + 2 * s.kv_heads) * hd),
        "attn_rope": streaming(2 * t * (s.q_heads + s.kv_heads) * hd),       # read and write q, k
        "attn_kv_cache_save": streaming(2 * t * s.values_per_token),         # read k, v; write to cache
        "attn_post_proj": gemm(t, s.q_heads * s.value_dim, e),
        "mlp_up_proj": _experts(routed, active, e, up, s.num_experts),
        "mlp_act": streaming(routed * s.ffn * (s.gate + 1)),                # read gate (+up), write
        "mlp_down_proj": _experts(routed, active, s.ffn, e, s.num_experts),
        "input_layernorm": streaming(2 * t * e),
        "post_attention_layernorm": streaming(2 * t * e),
        "add": streaming(3 * t * e),                                         # read two, write one
    }
    if s.num_experts > 1:
        kernels["moe_router"] = gemm(t, e, s.num_experts)
    for prefix, ffn in (("shared_expert_", s.shared_ffn), ("dense_mlp_", s.dense_ffn if s.moe_share < 1 else 0)):
        if ffn:
            kernels.update({f"{prefix}up_proj": gemm(t, e, ffn * s.gate),
                            f"{prefix}act": streaming(t * ffn * (s.gate + 1)), f"{prefix}down_proj": gemm(t, ffn, e)})
    return kernels


def expert_pairs(s: LayerShape, t: Amount) -> tuple[Amount, Amount]:
    """(token-expert pairs one GPU computes, experts whose weights it reads) for `t` tokens per
    DP rank. TP only: t x top_k pairs over every expert's slice. With DP the experts see the
    tokens of all DP ranks (each priced at this rank's t: a synchronized step of equal ranks);
    with EP one GPU gets 1 / EP of them, times the load imbalance, over its num_experts / EP.
    The experts read are those at least one of the group's tokens is routed to (`touched_experts`)."""
    if s.dp == 1 and s.ep == 1:
        routed = t * s.top_k                                   # token-expert pairs
        return routed, touched_experts(t, s.num_experts, s.top_k, s.num_experts)
    group_tokens = t * s.dp
    imbalance = s.load_imbalance or expert_load_imbalance(group_tokens, s.num_experts, s.top_k, s.ep)
    routed = group_tokens * s.top_k / s.ep * imbalance
    return routed, touched_experts(group_tokens, s.num_experts, s.top_k, s.num_experts / s.ep)


def touched_experts(tokens: Amount, num_experts: int, top_k: int, held: float) -> Amount:
    """Expected number of the `held` experts (of `num_experts`) that at least one of `tokens`
    tokens is routed to, each token picking `top_k` distinct experts uniformly: an expert misses
    one token with probability 1 - top_k / num_experts, all of them with that to the `tokens`,
    so held x (1 - (1 - top_k / num_experts) ^ tokens). Below min(tokens x top_k, held): small
    batches repeat experts (16 experts, top-1: 22 tokens touch 12.1 experts on average, not 16)."""
    miss = max(0.0, 1.0 - top_k / num_experts)
    return held * (1.0 - portable.power(miss, tokens))


def moe_exchange_bytes(s: LayerShape, layout: MoeLayout, t: Amount) -> Amount:
    """Bytes one GPU receives (and as many it sends) in ONE of a MoE layer's two exchanges
    (dispatch before the experts, combine after) for `t` tokens per DP rank, 16-bit values.
    vLLM's default (allgather_reducescatter): every DP rank's hidden states gathered, the other
    DP - 1 ranks' t x hidden x 2 bytes, reduce-scattered back (0 with DP = 1: TP's all-reduce
    combines). All-to-all (layout.all_to_all, EP > 1): the rank's tokens split over its TP GPUs,
    each token's top_k copies, the (EP - 1) / EP bound for other GPUs: t / TP x top_k x hidden x 2
    x (EP - 1) / EP."""
    if layout.all_to_all and s.ep > 1:
        return BYTES * t / layout.tp * s.top_k * s.embedding_dim * (s.ep - 1) / s.ep
    return BYTES * t * s.embedding_dim * (s.dp - 1)


def moe_exchange_steps(s: LayerShape, layout: MoeLayout) -> int:
    """Messages one GPU's exchange sends one after another (moe_exchange_bytes): vLLM's all-gather
    and reduce-scatter go round the DP - 1 other ranks in a ring; an all-to-all sends to every
    other GPU at once."""
    return 1 if layout.all_to_all and s.ep > 1 else max(1, s.dp - 1)


def _mla_projections(s: LayerShape, t: Amount) -> Cost:
    """MLA's projections of `t` new tokens: down to the query and KV latents (replicated), up
    from them to the GPU's query heads and, for the new tokens, their keys and values."""
    down = gemm(t, s.embedding_dim, s.q_lora_rank + s.latent)     # without q_lora_rank: the KV latent only
    q_up = gemm(t, s.q_lora_rank or s.embedding_dim, s.q_heads * s.head_dim)
    nope = s.head_dim - (s.latent - s.kv_lora_rank)
    kv_up = gemm(t, s.kv_lora_rank, s.q_heads * (nope + s.value_dim))
    parts = (down, q_up, kv_up)
    return Cost(sum(p.flops for p in parts), sum(p.bytes for p in parts),
                weight_values=sum(p.weight_values for p in parts),
                input_values=sum(p.input_values for p in parts))


def _experts(routed: Amount, active: Amount, k: float, n: float, num_experts: int) -> Cost:
    """Dense GEMM, or MoE experts: FLOPs for every routed token, weights of each active expert."""
    if num_experts == 1:
        return gemm(routed, k, n)
    return Cost(2 * routed * k * n, BYTES * (active * k * n + routed * (k + n)), weight_values=active * k * n,
                input_values=routed * k)


def prefill_attention(s: LayerShape, chunk: Amount, context: Amount) -> Cost:
    """Causal attention of `chunk` new tokens over `context` cached ones plus themselves: query i
    sees context + i + 1 keys; 2 x (qk + v head dims) FLOPs per (query, key) pair and head (QK^T
    and PV). Local layers see at most the window's keys (chunked attention priced as sliding,
    an upper bound); a model with both is priced at its average layer."""
    full = _prefill(s, chunk, context, chunk * context + chunk * (chunk + 1) / 2, context + chunk)
    if not s.local_share:
        return full
    local = _prefill(s, chunk, context, _window_pairs(chunk, context, s.window),
                     np.minimum(context, s.window) + chunk)
    return _blend(full, local, s.local_share)


def prefill_keys(s: LayerShape, chunk: Amount, context: Amount) -> Amount:
    """Cached and new keys an average layer reads for a chunk of `chunk` tokens over `context`
    cached ones: all of them in a global layer, the window's min(context, window) + chunk in a
    local one (the keys prefill_attention moves)."""
    if not s.local_share:
        return context + chunk
    local = np.minimum(context, s.window) + chunk
    return (1 - s.local_share) * (context + chunk) + s.local_share * local


def _prefill(s: LayerShape, chunk: Amount, context: Amount, pairs: Amount, keys: Amount) -> Cost:
    flops = 2 * (s.head_dim + s.value_dim) * s.q_heads * pairs
    moved = chunk * s.q_heads * (s.head_dim + s.value_dim) + keys * s.values_per_token
    return Cost(flops, BYTES * moved)


def _window_pairs(chunk: Amount, context: Amount, window: int) -> Amount:
    """(query, key) pairs of `chunk` queries at positions context+1 .. context+chunk (1-based)
    that each see min(position, window) keys."""
    first, last = context + 1, context + chunk
    top = np.minimum(last, window)
    below = np.where(top >= first, (first + top) * (top - first + 1) / 2, 0.0)
    return below + np.maximum(0, last - np.maximum(first - 1, window)) * window


def attended_context(s: LayerShape, num_decodes: Amount, context: Amount) -> Amount:
    """Keys an average layer reads for `num_decodes` decodes over `context` cached tokens in
    all: local layers at most the window per request (the cap applied to the batch's total)."""
    if not s.local_share:
        return context
    return (1 - s.local_share) * context + s.local_share * np.minimum(context, num_decodes * s.window)


def decode_attention(s: LayerShape, num_decodes: Amount, context: Amount) -> Cost:
    """One new token per request over `context` cached tokens in all: reads every cached K and V
    (MLA: the latent, attended with the absorbed up-projections, kv_lora_rank + rope per key and
    kv_lora_rank per value)."""
    context = attended_context(s, num_decodes, context)
    qk, v = (s.latent, s.kv_lora_rank) if s.latent else (s.head_dim, s.value_dim)
    flops = 2 * (qk + v) * s.q_heads * context
    moved = context * s.values_per_token + num_decodes * s.q_heads * (qk + v)
    return Cost(flops, BYTES * moved)


def _blend(full: Cost, local: Cost, local_share: float) -> Cost:
    return Cost((1 - local_share) * full.flops + local_share * local.flops,
                (1 - local_share) * full.bytes + local_share * local.bytes)


def embedding(embedding_dim: int, t: Amount) -> Cost:
    """Gather `t` embedding rows and write them out."""
    return streaming(2 * t * embedding_dim)


def lm_head(model: ModelSpec, tp: int, num_requests: Amount) -> Cost:
    """Logits of the last token of each request over the vocabulary shard of one GPU."""
    return gemm(num_requests, model.embedding_dim, model.vocab_size / tp)


def activation_bytes(embedding_dim: int, t: Amount) -> Amount:
    """Bytes of the hidden states of `t` tokens (what TP all-reduce and PP send/recv move)."""
    return BYTES * t * embedding_dim
