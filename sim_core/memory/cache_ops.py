"""KV-cache copies a vLLM v0 step orders before its model runs (blocks_to_swap_in,
blocks_to_swap_out, blocks_to_copy), per request, in the order the worker issues them."""

from __future__ import annotations

from dataclasses import dataclass, field

SWAP_IN, SWAP_OUT, COPY = range(3)
CACHE_OP_NAMES = ("swap_in", "swap_out", "copy")  # the worker's order: swap in, swap out, copy


@dataclass(slots=True, eq=False)
class CacheOps:
    """(kind, request id, number of blocks) entries of one step."""

    entries: list[tuple[int, int, int]] = field(default_factory=list)

    def add(self, kind: int, request_id: int, num_blocks: int) -> None:
        if num_blocks:
            self.entries.append((kind, request_id, num_blocks))

    def extend(self, other: CacheOps) -> None:
        self.entries.extend(other.entries)

    def ordered(self) -> list[tuple[int, int, int]]:
        """Entries in the worker's order: swap-ins, then swap-outs, then copies (stable)."""
        return sorted(self.entries, key=lambda entry: entry[0])

    def __bool__(self) -> bool:
        return bool(self.entries)

