"""What a cost model sees of a batch: token counts and KV context, never the requests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

if TYPE_CHECKING:
    from sim_core.entities import Request

Count = TypeVar("Count", float, np.ndarray)   # a number of requests, or a grid of them


@dataclass(frozen=True, slots=True)
class BatchShape:
    """The shape of one iteration.

    Attributes:
        num_requests: requests in the batch.
        total_tokens: tokens processed this iteration (prompt tokens, chunk tokens, 1 per decode).
        prefill_chunks: (tokens this iteration, tokens already in the KV cache) per prefilling
            request.
        num_decodes: requests generating one token.
        decode_context: sum over decoding requests of the tokens already in their KV cache.
    """

    num_requests: int
    total_tokens: int
    prefill_chunks: tuple[tuple[int, int], ...] = ()
    num_decodes: int = 0
    decode_context: int = 0

    @property
    def num_prefill_tokens(self) -> int:
        return sum(chunk for chunk, _ in self.prefill_chunks)


class Predictor(Protocol):
    """The cost-model contract: a batch shape in, a stage time out."""

    @property
    def needs_context(self) -> bool:
        """Whether stage times depend on more than the token totals (else shapes skip detail)."""
        ...

    def stage_time(self, shape: BatchShape, stage_id: int) -> float: ...

    def decode_run_times(self, num_requests: np.ndarray, context: np.ndarray, stage_id: int) -> np.ndarray:
        """Stage times of consecutive decode-only iterations (bitwise equal to stage_time of each)."""
        ...

    def cpu_times(self, requests: int) -> dict[str, float]:
        """Host seconds of an iteration with `requests` requests, per phase (`cpu_<phase>`)."""
        ...


def shape_of(requests: Sequence[Request], num_tokens: Sequence[int]) -> BatchShape:
    """Shape of a batch from its requests (before the iteration runs) and their token counts.

    A decoding request contributes one decode per token it runs: 1, or `num_seqs` for a group of
    parallel samples (each sequence is its own decode with its own context and logits row)."""
    chunks: list[tuple[int, int]] = []
    num_decodes, context = 0, 0
    for request, tokens in zip(requests, num_tokens):
        if request.is_prefill_complete:
            num_decodes += tokens
            context += tokens * request.num_processed_tokens
        else:
            chunks.append((tokens, request.num_processed_tokens))
    return BatchShape(len(chunks) + num_decodes, sum(num_tokens), tuple(chunks), num_decodes, context)


def padded(shape: BatchShape, num_padding: int) -> BatchShape:
    """The shape a GPU runs for `shape` plus `num_padding` dummy decodes (one token each, no
    KV context): CUDA-graph padding."""
    return BatchShape(shape.num_requests + num_padding, shape.total_tokens + num_padding, shape.prefill_chunks,
                      shape.num_decodes + num_padding, shape.decode_context)
