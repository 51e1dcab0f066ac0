"""Which shapes to measure (pure; no PyTorch).

Token counts follow Vidur's spacing: dense where kernels change behaviour (small batches),
sparser for large ones. Attention shapes: prefill chunks over cached contexts (one request),
and decode batches over per-request contexts, all within max_model_len.
"""

from __future__ import annotations


def token_grid(max_tokens: int) -> list[int]:
    """1, 2, 4, 8, then every 8 up to 128, every 32 up to 1024, every 128 beyond (<= max_tokens)."""
    points = {1, 2, 4}
    points.update(range(8, 129, 8))
    points.update(range(160, 1025, 32))
    points.update(range(1152, max_tokens + 1, 128))
    return sorted(p for p in points if p <= max_tokens) + ([max_tokens] if max_tokens not in points else [])


def prefill_shapes(max_model_len: int, chunks: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048, 4096),
                   context_step: int = 512) -> list[tuple[int, int]]:
    """(chunk, cached tokens) pairs with chunk + cached <= max_model_len."""
    return [(chunk, context) for chunk in chunks if chunk <= max_model_len
            for context in range(0, max_model_len - chunk + 1, context_step)]


def decode_shapes(max_model_len: int, max_batch: int,
                  batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)) -> list[tuple[int, int]]:
    """(batch size, cached tokens per request): contexts 64, 128, 256, ... up to max_model_len."""
    contexts = []
    context = 64
    while context <= max_model_len:
        contexts.append(context)
        context *= 2
    return [(batch, context) for batch in batches if batch <= max_batch for context in contexts]
