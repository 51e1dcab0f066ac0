"""The workload as columns: one row per request, in arrival order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Workload:
    """Requests to simulate; row i becomes request id i (arrival order, ties in file order).

    Attributes:
        arrived_at: seconds, non-decreasing float64.
        num_prefill_tokens: prompt tokens per request (>= 1), int64.
        num_decode_tokens: output tokens per request (>= 1), int64.
        source: where the rows came from (a file path or a generator description).
        notes: what was changed on the way in (sorting, clipping), for the user to read.
    """

    arrived_at: np.ndarray
    num_prefill_tokens: np.ndarray
    num_decode_tokens: np.ndarray
    source: str
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.arrived_at)
        assert len(self.num_prefill_tokens) == n and len(self.num_decode_tokens) == n
        assert n == 0 or (np.all(np.diff(self.arrived_at) >= 0) and self.num_prefill_tokens.min() >= 1
                          and self.num_decode_tokens.min() >= 1)

    def __len__(self) -> int:
        return len(self.arrived_at)


def clip_to_max_model_len(prefill: np.ndarray, decode: np.ndarray, max_model_len: int):
    """Vidur's rule: when prompt + output exceeds max_model_len, shorten the prompt.

    Returns (prefill, decode, num_clipped, first_unfixable_index); the last is the index of the
    first row whose output alone reaches max_model_len (its prompt cannot shrink to fit), or -1.
    """
    excess = np.maximum(prefill + decode - max_model_len, 0)
    clipped = prefill - excess
    bad = np.flatnonzero(clipped < 1)
    return clipped, decode, int(np.count_nonzero(excess)), int(bad[0]) if len(bad) else -1


def scale_tokens(tokens: np.ndarray, factor: float) -> np.ndarray:
    """Scale token counts as Vidur does: multiply, truncate to int, keep at least 1."""
    if factor == 1.0:
        return tokens.astype(np.int64)
    return np.maximum((tokens * factor).astype(np.int64), 1)
