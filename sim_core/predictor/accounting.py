"""Where a run's GPU time went: seconds per operator, summed over every stage execution.

Computed once from the batch and stage tables when the result is built, so the hot loop pays
nothing. For the grid predictors (roofline, learned) every token- and request-dependent
operator is priced from each stage's counts (a count histogram dotted with the operator's
table), decode attention from each batch's decodes and KV context; prefill attention is what
remains of each prefilling stage's recorded duration (it depends on each chunk's own context,
which the tables do not keep). KV swaps and copies a batch runs first (vllm_v0) add their
seconds to every stage of the batch; they are their own rows (`kv_swap_in`, `kv_swap_out`,
`kv_copy`). CUDA-graph padding (sglang) is priced as the padded batch the GPU runs. A step too
large for a CUDA graph (vllm_v1, eager.py) adds the gaps of its layers to its GPU work: their own
row, `eager_gaps` (as the Predictor page's overheads name them). What the host's launch floor adds
beyond that, where it binds, cannot be told apart from the prefill attention it covers: it stays in
that stage's remainder, booked as prefill attention (a decode-only step past the largest graph
needs more than 512 requests in flight; its remainder, the floor's excess there, is left out, and
the rows fall short of the stage time by it). CPU time hidden by overlap scheduling (sglang,
vllm_v1's async scheduling) is the negative row `cpu_hidden_by_overlap`. Rows sum to the total
stage time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim_core.portable_math import dot
from sim_core.predictor.grid import GridPredictor
from sim_core.predictor.linear import LinearPredictor

if TYPE_CHECKING:
    from sim_core.predictor.shape import Predictor

COLUMNS = ["operator", "seconds", "share"]


def operator_times(predictors: Sequence[Predictor], batches: pd.DataFrame, stages: pd.DataFrame,
                   cache_ops: pd.DataFrame | None = None, hidden_s: float = 0.0) -> pd.DataFrame:
    """One row per operator, largest first: seconds over all stage executions and share of the
    total; `predictors[r]` priced replica r's batches (P/D pools may have their own); `hidden_s`
    is the CPU time overlap scheduling took off the stage times. Empty when the run kept no batch
    tables (`engine.record: requests`)."""
    if not len(stages) or not len(batches):
        return pd.DataFrame({"operator": pd.Series(dtype=str), "seconds": pd.Series(dtype=float),
                             "share": pd.Series(dtype=float)})
    rows = _stage_rows(batches, stages)
    totals = _cache_op_totals(rows, cache_ops)
    for predictor, replicas in _replicas_by_predictor(predictors).items():
        mine = np.isin(rows["replica_id"], replicas)
        part = _totals(predictor, {name: column[mine] for name, column in rows.items()})
        for name, seconds in part.items():
            totals[name] = totals.get(name, 0.0) + seconds
    if hidden_s > 0:
        # overlap shortened stages: the decode-only ones show it as a negative remainder
        # (`unpriced`); the rest of it came off prefilling stages, whose remainder is prefill
        # attention minus what was hidden there
        totals["attn_prefill"] = totals.get("attn_prefill", 0.0) + hidden_s + totals.get("unpriced", 0.0)
        totals["cpu_hidden_by_overlap"] = -hidden_s
    totals.pop("unpriced", None)
    frame = pd.DataFrame({"operator": list(totals), "seconds": [float(v) for v in totals.values()]})
    total = frame["seconds"].sum()
    frame["share"] = frame["seconds"] / total if total > 0 else 0.0
    return frame.sort_values("seconds", ascending=False, kind="stable").reset_index(drop=True)[COLUMNS]


def _cache_op_totals(rows: dict[str, np.ndarray], cache_ops: pd.DataFrame | None) -> dict[str, float]:
    """Seconds of KV swaps / copies per kind over every stage execution; takes them out of the
    rows' durations (what remains is what the predictor priced)."""
    if cache_ops is None or not len(cache_ops):
        return {}
    width = int(max(rows["batch_id"].max(), cache_ops["batch_id"].max())) + 1
    stage_keys = rows["replica_id"] * width + rows["batch_id"]
    op_keys = cache_ops["replica_id"].to_numpy(np.int64) * width + cache_ops["batch_id"].to_numpy(np.int64)
    unique_keys, inverse, stages_per_batch = np.unique(stage_keys, return_inverse=True, return_counts=True)
    found = np.searchsorted(unique_keys, op_keys)
    seconds = cache_ops["seconds"].to_numpy(np.float64)
    per_batch = np.zeros(len(unique_keys))
    np.add.at(per_batch, found, seconds)
    rows["duration"] = rows["duration"] - per_batch[inverse]
    totals: dict[str, float] = {}
    for kind, secs, stages in zip(cache_ops["kind"].astype(str), seconds, stages_per_batch[found]):
        totals[f"kv_{kind}"] = totals.get(f"kv_{kind}", 0.0) + float(secs) * int(stages)
    return totals


def _replicas_by_predictor(predictors: Sequence[Predictor]) -> dict[Predictor, list[int]]:
    groups: dict[Predictor, list[int]] = {}
    for replica, predictor in enumerate(predictors):
        groups.setdefault(predictor, []).append(replica)
    return groups


def _totals(predictor: Predictor, rows: dict[str, np.ndarray]) -> dict[str, float]:
    if isinstance(predictor, GridPredictor):   # the only cost models with fixed_times
        return _grid_totals(predictor, rows)
    # the linear model: a base per stage execution and a price per token
    assert isinstance(predictor, LinearPredictor), "the cost models are linear or grid-based"
    return {"base": len(rows["duration"]) * predictor.base_s,
            "tokens": predictor.per_token_s * float(rows["num_tokens"].sum())}


def _stage_rows(batches: pd.DataFrame, stages: pd.DataFrame) -> dict[str, np.ndarray]:
    """Every stage execution (columns as arrays) with its batch's counts and its duration."""
    width = int(max(batches["batch_id"].max(), stages["batch_id"].max())) + 1
    keys = batches["replica_id"].to_numpy() * width + batches["batch_id"].to_numpy()
    order = np.argsort(keys, kind="stable")
    wanted = stages["replica_id"].to_numpy() * width + stages["batch_id"].to_numpy()
    rows = order[np.searchsorted(keys, wanted, sorter=order)]  # (replica, batch) is unique
    out = {name: batches[name].to_numpy(np.int64)[rows] for name in
           ("num_requests", "num_tokens", "num_prefill_tokens", "num_decodes", "decode_context")}
    if "padded_size" in batches:  # the GPU runs the padded batch: one more request and token per pad
        padding = batches["padded_size"].to_numpy(np.int64)[rows] - out["num_requests"]
        out["num_requests"], out["num_tokens"] = out["num_requests"] + padding, out["num_tokens"] + padding
    out["stage_id"] = stages["stage_id"].to_numpy(np.int64)
    out["replica_id"] = stages["replica_id"].to_numpy(np.int64)
    out["batch_id"] = stages["batch_id"].to_numpy(np.int64)
    out["duration"] = stages["end"].to_numpy(np.float64) - stages["start"].to_numpy(np.float64)
    return out


def _grid_totals(predictor: GridPredictor, rows: dict[str, np.ndarray]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for stage in np.unique(rows["stage_id"]).tolist():
        mine = {name: column[rows["stage_id"] == stage] for name, column in rows.items()}
        tokens, requests = mine["num_tokens"], mine["num_requests"]
        token_ops = _weighted(predictor.layer_ops, tokens, predictor.layers)
        token_ops.update(_weighted(partial(predictor.stage_token_ops, stage=stage), tokens, 1))
        request_ops = _weighted(partial(predictor.request_ops, stage=stage), requests, 1)
        decode = _decode_seconds(predictor, mine)
        gaps = predictor.eager_gap_times(tokens, stage)
        priced = predictor.fixed_times(tokens, requests, stage) + decode + gaps
        rest, prefilling = mine["duration"] - priced, mine["num_prefill_tokens"] > 0
        eager = (("eager_gaps", gaps.sum()),) if gaps.any() else ()   # a row only where a step ran eager
        for name, seconds in (*token_ops.items(), *request_ops.items(), ("attn_decode", decode.sum()), *eager,
                              ("attn_prefill", rest[prefilling].sum()), ("unpriced", rest[~prefilling].sum())):
            totals[name] = totals.get(name, 0.0) + float(seconds)
    return totals


def _weighted(ops: Callable[[np.ndarray], dict[str, np.ndarray]], counts: np.ndarray, scale: int) -> dict[str, float]:
    """Sum over rows of each operator's time at the row's count: histogram . table."""
    histogram = np.bincount(counts)
    grid = np.arange(len(histogram), dtype=np.float64)
    return {name: scale * dot(histogram, values) for name, values in ops(grid).items()}


def _decode_seconds(predictor: GridPredictor, rows: dict[str, np.ndarray]) -> np.ndarray:
    decodes = rows["num_decodes"].astype(np.float64)
    seconds = predictor.layers * predictor.decode_attention(decodes, rows["decode_context"].astype(np.float64))
    return np.where(decodes > 0, seconds, 0.0)
