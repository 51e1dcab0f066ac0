"""KV-cache copies a vLLM v0 step orders before its model runs (blocks_to_swap_in,
blocks_to_swap_out, blocks_to_copy), per request, in the order the worker issues them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

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


def cache_op_spans(cache_ops: pd.DataFrame, batch_stages: pd.DataFrame) -> pd.DataFrame:
    """When each recorded cache operation ran on each pipeline stage: a DataFrame with the
    operation's columns plus stage_id, start and end. A batch's operations run one after another
    (in the recorded order) at the start of each of its stages, before its model."""
    import pandas as pd

    columns = [*cache_ops.columns, "stage_id", "start", "end"]
    if not len(cache_ops) or not len(batch_stages):
        return pd.DataFrame({name: [] for name in columns})
    frame = cache_ops.reset_index(drop=True).reset_index(names="order")
    frame = frame.merge(batch_stages[["replica_id", "batch_id", "stage_id", "start"]], on=["replica_id", "batch_id"])
    frame = frame.sort_values(["replica_id", "batch_id", "stage_id", "order"], kind="stable")
    done = frame.groupby(["replica_id", "batch_id", "stage_id"], sort=False)["seconds"].cumsum()
    frame["end"] = frame["start"] + done
    frame["start"] = frame["end"] - frame["seconds"]
    ordered = frame.sort_values(["start", "replica_id", "stage_id", "order"], kind="stable")
    return ordered[columns].reset_index(drop=True)
