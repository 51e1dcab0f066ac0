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


def padding_table(max_requests: int, sizes: Sequence[int]) -> np.ndarray:
    """`padded_size` of every batch size 0..max_requests, for looking up many at once."""
    return np.array([padded_size(n, sizes) for n in range(max_requests + 1)], dtype=np.int64)
