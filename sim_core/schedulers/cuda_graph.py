"""CUDA-graph batch padding (SGLang's `CudaGraphRunner.pad_batch` / vLLM's capture sizes).

A decode batch replays a graph captured for a fixed batch size: it runs padded with dummy
requests up to the smallest captured size that holds it; a batch larger than every captured
size runs eagerly, unpadded.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np


def padded_size(num_requests: int, sizes: Sequence[int]) -> int:
    """The batch size the GPU runs for `num_requests` decodes (`sizes` sorted ascending)."""
    index = bisect_left(sizes, num_requests)
    return sizes[index] if index < len(sizes) else num_requests


def padded_sizes(num_requests: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """`padded_size` of each element (a decode run's live members per iteration; `sizes` sorted
    ascending, not empty)."""
    index = np.searchsorted(sizes, num_requests, side="left")
    return np.where(index < len(sizes), sizes[np.minimum(index, len(sizes) - 1)], num_requests)
