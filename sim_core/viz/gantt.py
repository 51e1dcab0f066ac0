"""Chrome-trace-style Gantt of pipeline stages: rows = replica x stage, bars = batch stages; with
P/D disaggregation each prefill replica also has a KV-link row whose bars are transfers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim_core.results.cache_ops import cache_op_spans
from sim_core.viz.decimate import close_runs
from sim_core.viz.margins import label_margin

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

KIND_COLORS = {"prefill": "#d95f02", "mixed": "#7570b3", "decode": "#1b9e77"}
TRANSFER_COLOR = "#e6ab02"
OP_COLORS = {"swap_in": "#59a14f", "swap_out": "#e15759", "copy": "#b07aa1"}   # vllm_v0's KV copies
OP_NAMES = {"swap_in": "swap in (PCIe)", "swap_out": "swap out (PCIe)", "copy": "copy-on-write"}
MAX_BARS = 4000
GANTT_PIXELS = 1500      # about the chart's width: bars closer than window / GANTT_PIXELS look joined
MERGED_COLOR = "#9e9e9e"


def batch_kind(num_prefill_tokens: np.ndarray, num_tokens: np.ndarray, num_requests: np.ndarray) -> np.ndarray:
    """'prefill' (only prompt tokens), 'decode' (only decode tokens) or 'mixed', per batch."""
    decodes = num_tokens - num_prefill_tokens
    kind = np.where(num_prefill_tokens == 0, "decode", "mixed")
    return np.where(decodes == 0, "prefill", kind)


def gantt_frame(result: SimulationResult, start: float | None = None, end: float | None = None,
                stages: pd.DataFrame | None = None) -> pd.DataFrame:
    """Stage executions in [start, end) (or the given `stages` rows) joined with their batch, at
    most MAX_BARS rows."""
    stages = _in_window(result.batch_stages, start, end) if stages is None else stages
    stages = stages.head(MAX_BARS)
    batches = result.batches[["replica_id", "batch_id", "num_requests", "num_tokens", "num_prefill_tokens",
                              "request_ids", "padded_size"]]
    frame = stages.merge(batches, on=["replica_id", "batch_id"], how="left")
    frame["kind"] = batch_kind(frame["num_prefill_tokens"].to_numpy(), frame["num_tokens"].to_numpy(),
                               frame["num_requests"].to_numpy())
    names = [replica.name for replica in result.replicas]
    frame["row"] = [f"{names[r]} / stage {s}" for r, s in zip(frame["replica_id"], frame["stage_id"])]
    frame["requests"] = [_ids_text(ids) for ids in frame["request_ids"]]
    return frame


def thin_stages(stages: pd.DataFrame, start: float, end: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(stages drawn one by one, merged runs) for a window with more than MAX_BARS stage bars.

    Up to MAX_BARS stages pass unchanged and no run is merged. Above that, on each lane (replica
    x stage, in time order) the stages that start less than a pixel (window / GANTT_PIXELS)
    after the previous one ends form a run (`close_runs`): a run of one stays a stage; a longer
    run becomes one bar from its first start to its last end, with the number of stages and
    their busy seconds (columns replica_id, stage_id, start, end, num_stages, busy_s). Gaps of a
    pixel or more, the bubbles a reader looks for, stay as they are."""
    if len(stages) <= MAX_BARS:
        return stages, pd.DataFrame(columns=["replica_id", "stage_id", "start", "end", "num_stages", "busy_s"])
    ordered = stages.sort_values(["replica_id", "stage_id", "start"], kind="stable")
    lane = ordered["replica_id"].to_numpy() * (int(ordered["stage_id"].max()) + 1) + ordered["stage_id"].to_numpy()
    runs = close_runs(lane, ordered["start"].to_numpy(), ordered["end"].to_numpy(), (end - start) / GANTT_PIXELS)
    alone = np.bincount(runs)[runs] == 1
    grouped = ordered[~alone].assign(busy_s=ordered["end"] - ordered["start"]).groupby(runs[~alone])
    merged = grouped.agg(replica_id=("replica_id", "first"), stage_id=("stage_id", "first"), start=("start", "min"),
                         end=("end", "max"), num_stages=("start", "size"), busy_s=("busy_s", "sum"))
    return ordered[alone], merged.reset_index(drop=True)


def _in_window(table: pd.DataFrame, start: float | None, end: float | None) -> pd.DataFrame:
    """Rows of a table with start and end columns that overlap [start, end)."""
    if start is not None:
        table = table[table["end"] > start]
    if end is not None:
        table = table[table["start"] < end]
    return table


def link_row(name: str) -> str:
    return f"{name} / KV link"


def transfer_frame(result: SimulationResult, start: float | None = None, end: float | None = None) -> pd.DataFrame:
    """KV transfers in [start, end) with their lane (the sending replica's link), at most MAX_BARS."""
    transfers = result.transfers
    if not len(transfers):
        return pd.DataFrame({"row": [], "start": [], "end": [], "request_id": [], "num_bytes": [], "target": []})
    if start is not None:
        transfers = transfers[transfers["end"] > start]
    if end is not None:
        transfers = transfers[transfers["start"] < end]
    transfers = transfers.head(MAX_BARS)
    names = [replica.name for replica in result.replicas]
    return pd.DataFrame({"row": [link_row(names[r]) for r in transfers["source_replica"]],
                         "start": transfers["start"].to_numpy(), "end": transfers["end"].to_numpy(),
                         "request_id": transfers["request_id"].to_numpy(),
                         "num_bytes": transfers["num_bytes"].to_numpy(),
                         "target": [names[r] for r in transfers["target_replica"]]})


def lanes(result: SimulationResult) -> list[str]:
    """Gantt rows from top to bottom: each replica's stages (each followed by its KV-copy lane),
    then, for a prefill replica, its KV link."""
    rows = []
    for replica in result.replicas:
        for s in range(replica.pipeline_parallel_size):
            rows += [f"{replica.name} / stage {s}", copy_row(replica.name, s)]
        if replica.pool == "prefill":
            rows.append(link_row(replica.name))
    return rows


def copy_row(name: str, stage: int) -> str:
    return f"{name} / stage {stage} / KV copies"


def cache_op_frame(result: SimulationResult, start: float | None = None, end: float | None = None) -> pd.DataFrame:
    """KV swaps and copies in [start, end) as bars on their own lane below each stage row
    ("replica r / stage s / KV copies"), at most MAX_BARS rows."""
    ops = cache_op_spans(result.cache_ops, result.batch_stages)
    if start is not None:
        ops = ops[ops["end"] > start]
    if end is not None:
        ops = ops[ops["start"] < end]
    ops = ops.head(MAX_BARS).copy()
    names = [replica.name for replica in result.replicas]
    ops["row"] = [copy_row(names[r], s) for r, s in zip(ops["replica_id"], ops["stage_id"])]
    return ops


def _ids_text(ids: Iterable[int]) -> str:
    ids = list(ids)
    return " ".join(map(str, ids[:12])) + (f" ... (+{len(ids) - 12})" if len(ids) > 12 else "")


def pipeline_gantt(result: SimulationResult, start: float | None = None, end: float | None = None,
                   selected: int | None = None) -> go.Figure:
    """Horizontal bars on a numeric time axis (seconds), one trace per batch kind; gaps on a
    stage row are pipeline bubbles. Hover shows batch id, requests, the GPU batch size (with
    CUDA-graph padding; padded bars are hatched) and token counts. Batches carrying the selected
    request are outlined."""
    stages = _in_window(result.batch_stages, start, end)
    first = float(stages["start"].min()) if start is None and len(stages) else (start or 0.0)
    last = float(stages["end"].max()) if end is None and len(stages) else (end or 0.0)
    singles, merged = thin_stages(stages, first, last)
    frame, ops = gantt_frame(result, stages=singles), cache_op_frame(result, start, end)
    merged = merged.assign(row=[f"{result.replicas[r].name} / stage {s}"
                                for r, s in zip(merged["replica_id"], merged["stage_id"])])
    used = {*frame["row"], *ops["row"], *merged["row"]}
    rows = [row for row in lanes(result) if row in used or row.endswith("KV link")][::-1]
    figure = go.Figure()
    for kind, color in KIND_COLORS.items():
        part = frame[frame["kind"] == kind]
        if not len(part):
            continue
        figure.add_trace(go.Bar(
            name=kind, orientation="h", y=part["row"], base=part["start"], x=part["end"] - part["start"],
            marker={"color": color, "line": {"width": 0},   # hatched: padded to a CUDA-graph size
                    "pattern": {"shape": np.where(part["padded_size"] > part["num_requests"], "/", "")}},
            customdata=np.stack([part["batch_id"], part["num_requests"], part["num_tokens"],
                                 part["num_prefill_tokens"], part["requests"], part["padded_size"]], axis=1),
            hovertemplate=("batch %{customdata[0]}<br>%{base:.4f} s + %{x:.4f} s<br>%{customdata[1]} requests "
                           "(GPU batch %{customdata[5]}), %{customdata[2]} tokens (%{customdata[3]} prompt)"
                           "<br>ids: %{customdata[4]}<extra>%{y}</extra>")))
    _add_merged(figure, merged, len(stages), len(frame), len(singles) - len(frame), (last - first) / GANTT_PIXELS)
    _add_transfers(figure, transfer_frame(result, start, end))
    _add_cache_ops(figure, ops)
    if selected is not None:
        everything = frame if not len(merged) else gantt_frame(result, stages=_carrying(result, stages, selected))
        mine = everything[[selected in ids for ids in everything["request_ids"]]]
        figure.add_trace(go.Bar(name=f"request {selected}", orientation="h", y=mine["row"], base=mine["start"],
                                x=mine["end"] - mine["start"], marker={"color": "rgba(0,0,0,0)",
                                                                       "line": {"width": 2, "color": "#ffb000"}},
                                hoverinfo="skip"))
    figure.update_layout(barmode="overlay", xaxis_title="time (s)", yaxis={"categoryorder": "array",
                         "categoryarray": rows}, height=140 + 40 * max(len(rows), 1), bargap=0.25,
                         legend_title_text="batch",
                         margin={"l": label_margin(rows), "r": 120, "t": 30, "b": 68})   # legend at the right
    return figure


def _carrying(result: SimulationResult, stages: pd.DataFrame, request: int) -> pd.DataFrame:
    """The stage rows of the batches that carry `request`."""
    batches = result.batches
    mine = batches[[request in ids for ids in batches["request_ids"]]][["replica_id", "batch_id"]]
    return stages.merge(mine, on=["replica_id", "batch_id"])


def _add_merged(figure: go.Figure, merged: pd.DataFrame, num_stages: int, num_single: int, num_dropped: int,
                pixel_s: float) -> None:
    """The merged runs as grey bars (hover: stages, span, busy share) and a note above the chart
    saying how the window was thinned (and how many lone bars past MAX_BARS were left out)."""
    if not len(merged):
        return
    figure.add_trace(go.Bar(
        name="batches under 1 px apart, merged", orientation="h", y=merged["row"], base=merged["start"],
        x=merged["end"] - merged["start"], marker={"color": MERGED_COLOR, "line": {"width": 0}},
        customdata=np.stack([merged["num_stages"], merged["busy_s"] / (merged["end"] - merged["start"])], axis=1),
        hovertemplate=("%{customdata[0]} batches merged<br>%{base:.3f} s + %{x:.3f} s, busy %{customdata[1]:.1%}"
                       "<extra>%{y}</extra>")))
    figure.add_annotation(
        text=f"{num_stages:,} batch stages: {num_single:,} drawn alone, {int(merged['num_stages'].sum()):,} in "
             f"{len(merged):,} merged bars (grey: less than {pixel_s:.3g} s apart)"
             + (f", {num_dropped:,} not drawn" if num_dropped else "") + "; narrow the window to see each",
        xref="paper", yref="paper", x=0, y=1, xanchor="left", yanchor="bottom", showarrow=False,
        font={"size": 11, "color": "#555"})


def _add_transfers(figure: go.Figure, transfers: pd.DataFrame) -> None:
    """One trace of all transfer bars (hover: request, bytes, destination)."""
    if not len(transfers):
        return
    figure.add_trace(go.Bar(
        name="KV transfer", orientation="h", y=transfers["row"], base=transfers["start"],
        x=transfers["end"] - transfers["start"], marker={"color": TRANSFER_COLOR, "line": {"width": 0}},
        customdata=np.stack([transfers["request_id"], transfers["num_bytes"] / 1e6, transfers["target"]], axis=1),
        hovertemplate=("request %{customdata[0]}: %{customdata[1]:.1f} MB to %{customdata[2]}<br>"
                       "%{base:.4f} s + %{x:.4f} s<extra>%{y}</extra>")))
def _add_cache_ops(figure: go.Figure, ops: pd.DataFrame) -> None:
    """One trace per kind of KV copy (swap in, swap out, copy-on-write)."""
    kinds = ops["kind"].astype(str) if len(ops) else ops.get("kind", pd.Series(dtype=str))
    for kind, color in OP_COLORS.items():
        part = ops[kinds == kind]
        if not len(part):
            continue
        figure.add_trace(go.Bar(
            name=OP_NAMES[kind], orientation="h", y=part["row"], base=part["start"], x=part["end"] - part["start"],
            marker={"color": color, "line": {"width": 0}},
            customdata=np.stack([part["batch_id"], part["request_id"], part["num_blocks"]], axis=1),
            hovertemplate=(f"{OP_NAMES[kind]}: %{{customdata[2]}} blocks of request %{{customdata[1]}}<br>"
                           "before batch %{customdata[0]}<br>%{base:.6f} s + %{x:.6f} s<extra>%{y}</extra>")))


def stage_busy(result: SimulationResult, start: float, end: float) -> dict[tuple[int, int], float]:
    """Share of [start, end] each (replica, stage) spends executing batches (1 - share is idle
    time: pipeline bubbles, or no work)."""
    stages = result.batch_stages
    span = max(end - start, 1e-12)
    clipped = np.clip(stages["end"], start, end) - np.clip(stages["start"], start, end)
    busy = clipped.groupby([stages["replica_id"], stages["stage_id"]]).sum()
    return {(int(r), int(s)): float(v) / span for (r, s), v in busy.items()}
