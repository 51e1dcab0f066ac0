"""CUDA-graph batch padding (SGLang's `CudaGraphRunner.pad_batch` / vLLM's capture sizes).

A decode batch replays a graph captured for a fixed batch size: it runs padded with dummy
requests up to the smallest captured size that holds it; a batch larger than every captured
size runs eagerly, unpadded.
"""

from __future__ import annotations

from bisect import bisect_left


def padded_size(num_requests: int, sizes: list[int]) -> int:
    """The batch size the GPU runs for `num_requests` decodes (`sizes` sorted ascending)."""
    index = bisect_left(sizes, num_requests)
    return sizes[index] if index < len(sizes) else num_requests
