"""vllm_v0's KV swaps and copies in a result: the recorded table, and when each one ran on
each pipeline stage (for the Gantt's and the Chrome trace's KV-copy lanes)."""

from __future__ import annotations

import pandas as pd

from sim_core.memory.cache_ops import CACHE_OP_NAMES


def cache_op_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The recorded cache operations (in canonical order) with `kind` as names (swap_in,
    swap_out, copy) instead of codes. Mutates and returns `frame`."""
    frame["kind"] = pd.Categorical.from_codes(frame["kind"].astype(int), categories=list(CACHE_OP_NAMES)) \
        if len(frame) else pd.Series([], dtype="object")
    return frame


def cache_op_spans(cache_ops: pd.DataFrame, batch_stages: pd.DataFrame) -> pd.DataFrame:
    """When each recorded cache operation ran on each pipeline stage: a DataFrame with the
    operation's columns plus stage_id, start and end. A batch's operations run one after another
    (in the recorded order) at the start of each of its stages, before its model."""
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
