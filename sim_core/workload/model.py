"""The workload as columns: one row per request, in arrival order."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

# Optional per-request columns a workload may carry (int64, one value per row): `n` (vllm_v0's
# parallel samples), `priority` (vllm_v1's priority policy), `prefix_group`/`prefix_len` (the
# prefix caches' block keys) and `session_id`/`turn` (closed-loop sessions).
OPTIONAL_COLUMNS = ("priority", "session_id", "turn", "prefix_group", "prefix_len", "n")


@dataclass(frozen=True)
class Workload:
    """Requests to simulate; row i becomes request id i (arrival order, ties in file order).

    Attributes:
        arrived_at: seconds, non-decreasing float64.
        num_prefill_tokens: prompt tokens per request (>= 1), int64.
        num_decode_tokens: output tokens per request (>= 1), int64.
        source: where the rows came from (a file path or a generator description).
        notes: what was changed on the way in (sorting, clipping, skipped rows), for the user.
        priority: optional; smaller is more urgent (vLLM's convention).
        session_id, turn: optional; the conversation a request belongs to and its 0-based turn.
        prefix_group: optional; id of the shared prompt prefix (e.g. a system prompt), -1 if none.
        prefix_len: optional; leading prompt tokens identical to an earlier request's tokens.
        hash_ids, hash_offsets: optional prefix-block hashes (Mooncake style): the hashes of row
            i are hash_ids[hash_offsets[i]:hash_offsets[i + 1]]; equal hashes mean equal blocks.
        hash_block_size: tokens per hashed block (0 when there are no hashes).
        n: optional; parallel samples per request (>= 1, default 1): vllm_v0 serves them as one
            group of n sequences that share the prompt's KV blocks, each decoding the output tokens.
    """

    arrived_at: np.ndarray
    num_prefill_tokens: np.ndarray
    num_decode_tokens: np.ndarray
    source: str
    notes: tuple[str, ...] = ()
    priority: np.ndarray | None = None
    session_id: np.ndarray | None = None
    turn: np.ndarray | None = None
    prefix_group: np.ndarray | None = None
    prefix_len: np.ndarray | None = None
    hash_ids: np.ndarray | None = None
    hash_offsets: np.ndarray | None = None
    hash_block_size: int = 0
    n: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.arrived_at)
        assert len(self.num_prefill_tokens) == n and len(self.num_decode_tokens) == n
        assert n == 0 or (np.all(np.diff(self.arrived_at) >= 0) and self.num_prefill_tokens.min() >= 1
                          and self.num_decode_tokens.min() >= 1)
        assert all(len(values) == n for values in self.optional_columns().values())
        assert (self.hash_ids is None) == (self.hash_offsets is None)
        assert self.hash_offsets is None or len(self.hash_offsets) == n + 1

    def __len__(self) -> int:
        return len(self.arrived_at)

    def optional_columns(self) -> dict[str, np.ndarray]:
        """The optional per-request columns this workload has, by name."""
        return {name: getattr(self, name) for name in OPTIONAL_COLUMNS if getattr(self, name) is not None}

    def hashes_of(self, row: int) -> np.ndarray:
        """Prefix-block hashes of one request (empty when the workload has none)."""
        if self.hash_ids is None:
            return np.empty(0, dtype=np.int64)
        assert self.hash_offsets is not None, "hash_ids come with their offsets"
        return self.hash_ids[self.hash_offsets[row]: self.hash_offsets[row + 1]]

    def take(self, rows: np.ndarray, **changes: Any) -> Workload:
        """A workload of the given rows (in the given order) with every column kept aligned;
        `changes` replace fields of the result (e.g. arrived_at, notes)."""
        columns = {f.name: getattr(self, f.name)[rows] for f in fields(self)
                   if f.name in ("arrived_at", "num_prefill_tokens", "num_decode_tokens", *OPTIONAL_COLUMNS)
                   and getattr(self, f.name) is not None}
        if self.hash_ids is not None:
            assert self.hash_offsets is not None, "hash_ids come with their offsets"
            columns["hash_ids"], columns["hash_offsets"] = take_ragged(self.hash_ids, self.hash_offsets, rows)
        return replace(self, **{**columns, **changes})

    def with_notes(self, *notes: str) -> Workload:
        return replace(self, notes=self.notes + tuple(notes))


def take_ragged(values: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.asarray(rows, dtype=np.int64)
    lengths = (offsets[1:] - offsets[:-1])[rows]
    new_offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    starts = np.repeat(offsets[:-1][rows] - new_offsets[:-1], lengths)
    return values[np.arange(new_offsets[-1], dtype=np.int64) + starts], new_offsets


def clip_to_max_model_len(prefill: np.ndarray, decode: np.ndarray,
                          max_model_len: int) -> tuple[np.ndarray, np.ndarray, int, int]:
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
