"""Time each operator with PyTorch on the current CUDA device (imported only when measuring).

Each operator is a small bf16 PyTorch expression with the layer's TP-sharded shapes, timed
with CUDA events after warm-up; attention uses scaled_dot_product_attention (causal for
prefill over a cached context, one query per request for decode).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from sim_core.errors import SimCoreError
from sim_core.predictor.operators import LayerShape

WARMUP, REPEATS = 3, 10


class ProfilerUnavailable(SimCoreError):
    """PyTorch or a CUDA device is missing."""


def require_torch() -> ModuleType:
    """The torch module, or a one-line error saying how to get it."""
    try:
        import torch
    except ImportError:
        raise ProfilerUnavailable("profiling needs PyTorch with CUDA (pip install torch); it is not a "
                                  "runtime requirement of the simulator") from None
    if not torch.cuda.is_available():
        raise ProfilerUnavailable("profiling needs a CUDA GPU; torch.cuda.is_available() is False")
    return torch


def timed(torch: ModuleType, fn: Callable[[], object]) -> list[float]:
    """Milliseconds of REPEATS calls of fn after WARMUP calls."""
    for _ in range(WARMUP):
        fn()
    samples = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


def measure_mlp(torch: ModuleType, s: LayerShape, vocab: int, t: int) -> dict[str, list[float]]:
    """Samples (ms) of every token-dependent operator for `t` tokens."""
    kw = {"device": "cuda", "dtype": torch.bfloat16}
    e, hd, ffn = s.embedding_dim, s.head_dim, int(s.ffn)
    x = torch.randn(t, e, **kw)
    qkv_w = torch.randn(e, (s.q_heads + 2 * s.kv_heads) * hd, **kw)
    out_w = torch.randn(s.q_heads * hd, e, **kw)
    up_w, down_w = torch.randn(e, ffn * s.gate, **kw), torch.randn(ffn, e, **kw)
    q = torch.randn(t, (s.q_heads + s.kv_heads) * hd, **kw)
    h = torch.randn(t, ffn * s.gate, **kw)
    table, ids = torch.randn(vocab, e, **kw), torch.randint(0, vocab, (t,), device="cuda")
    norm_w = torch.ones(e, **kw)
    act = (lambda: torch.nn.functional.silu(h[:, :ffn]) * h[:, ffn:]) if s.gate == 2 else \
        (lambda: torch.nn.functional.gelu(h))
    ops = {
        "emb": lambda: torch.nn.functional.embedding(ids, table),
        "input_layernorm": lambda: torch.nn.functional.rms_norm(x, (e,), norm_w),
        "attn_pre_proj": lambda: x @ qkv_w,
        "attn_rope": lambda: q * 0.5 + q.roll(1, -1) * 0.5,
        "attn_post_proj": lambda: x[:, : s.q_heads * hd] @ out_w if s.q_heads * hd <= e else x @ out_w[:e],
        "post_attention_layernorm": lambda: torch.nn.functional.rms_norm(x, (e,), norm_w),
        "mlp_up_proj": lambda: x @ up_w,
        "mlp_act": act,
        "mlp_down_proj": lambda: h[:, :ffn] @ down_w,
        "add": lambda: x + x,
    }
    return {name: timed(torch, fn) for name, fn in ops.items()}


def measure_attention(torch: ModuleType, s: LayerShape, batch: int, chunk: int, context: int) -> dict[str, list[float]]:
    """Samples (ms) of prefill (batch 1, `chunk` new tokens) or decode (`chunk` = 1 per request)
    attention over `context` cached tokens, and of saving the new K and V into a cache."""
    kw = {"device": "cuda", "dtype": torch.bfloat16}
    hd = s.head_dim
    q = torch.randn(batch, s.q_heads, chunk, hd, **kw)
    k = torch.randn(batch, s.kv_heads, context + chunk, hd, **kw)
    v = torch.randn_like(k)
    cache = torch.empty(2, batch * (context + chunk), s.kv_heads, hd, **kw)
    new = torch.randn(2, batch * chunk, s.kv_heads, hd, **kw)
    slots = torch.arange(batch * chunk, device="cuda")
    causal = chunk > 1
    attention = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
        q, k, v, is_causal=causal and context == 0, enable_gqa=True)
    name = "attn_prefill" if chunk > 1 else "attn_decode"
    return {name: timed(torch, attention), "attn_kv_cache_save": timed(torch, lambda: cache.index_copy_(1, slots, new))}
