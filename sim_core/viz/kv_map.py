"""The animated KV-cache map: one cell per physical block (or super-cell), replicas stacked,
play/pause and a time scrubber, with the utilization line and preemptions below."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import plotly.graph_objects as go

from sim_core.viz.decimate import step_peaks
from sim_core.viz.grid import axes, grid_figure
from sim_core.viz.kv_blocks import (
    CACHED,
    FREE,
    SELECTED,
    STATE_COLORS,
    STATE_NAMES,
    BlockFrames,
    offload_use,
    preemptions,
    replica_frames,
    sample_times,
    super_cells,
    swap_use,
    touched_blocks,
    utilization,
)

if TYPE_CHECKING:
    from sim_core.results.replicas import ReplicaInfo
    from sim_core.results.result import SimulationResult

MAX_CELLS = 1024          # per replica; more blocks are aggregated into super-cells
MAX_VALUES = 400_000      # cells x frames x replicas sent to the browser
MAX_BLOCK_VALUES = 20_000_000   # touched blocks x frames (all replicas) held while the frames are built
FRAME_MS = 150
MAX_MARKS = 200           # preemption markers per replica before they are binned
UTIL_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f")


def kv_layout(num_blocks: int, num_replicas: int, max_frames: int) -> tuple[int, int, int, int]:
    """(blocks per cell, cells per replica, grid width, frames) keeping the payload bounded."""
    group = -(-num_blocks // MAX_CELLS)
    cells = -(-num_blocks // group)
    width = min(64, cells)
    frames = int(max(2, min(max_frames, MAX_VALUES // max(cells * num_replicas, 1))))
    return group, cells, width, frames


def kv_map_figure(result: SimulationResult, start: float = 0.0, end: float | None = None, max_frames: int = 60,
                  selected: int | None = None, replicas: int | None = None) -> go.Figure:
    """Animated block map over [start, end] (default: the whole run) of the first `replicas`
    replicas (default: all); the selected request's blocks get their own colour. Every replica
    gets a grid of the largest replica's size; a replica with fewer blocks (P/D pools) leaves
    the cells past its last block empty."""
    shown = result.replicas[:replicas or len(result.replicas)]
    end = _run_end(result) if end is None else end
    group, cells, width, frames = kv_layout(result.num_blocks, len(shown), max_frames)
    touched = sum(touched_blocks(result, replica.id) for replica in shown)
    frames = max(2, min(frames, MAX_BLOCK_VALUES // touched))   # bounds the per-block arrays built
    times = sample_times(start, end, frames)
    height = -(-cells // width)
    stacked = [_grid(replica_frames(result, replica.id, times, selected), group, cells, width, replica.num_blocks)
               for replica in shown]
    z = _stack([s[0] for s in stacked], height)
    # with group 1 every grid has its owners
    owners = _stack(cast(list[np.ndarray], [s[1] for s in stacked]), height) if group == 1 else None
    figure = grid_figure(2, 1, row_heights=(0.72, 0.28), vertical_spacing=0.08)
    present = sorted({0, *np.unique(z[z >= 0]).tolist()}) if group == 1 else []
    # open where the selected request holds most blocks, else on the fullest moment (not an empty cache)
    first = selected_frame(z) if selected is not None and group == 1 else None
    first = peak_frame(z, group > 1) if first is None else first
    layers: list[tuple[np.ndarray, np.ndarray | None]] = [(z, None)]
    if owners is not None:   # blocks a request holds, and those none holds: each its own hover text
        held = np.where(np.isnan(owners), np.nan, z.astype(np.float32))
        layers = [(held, owners), (np.where(np.isnan(owners) & (z >= 0), z.astype(np.float32), np.nan), None)]
    for layer, (values, holders) in enumerate(layers):
        figure.add_trace(_heatmap(values[first], None if holders is None else holders[first], group, width, height,
                                  held=layer == 0).update(axes(1)))
    _add_utilization(figure, result, shown, times[first])
    for code in present:
        figure.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=STATE_NAMES[code],
                                    marker={"symbol": "square", "size": 12, "color": STATE_COLORS[code]}, **axes(1)))
    figure.frames = [go.Frame(name=f"{t:.3f}", traces=list(range(len(layers) + 1)),
                              data=[*(go.Heatmap(z=values[i], customdata=None if holders is None else holders[i])
                                      for values, holders in layers), _time_marker(t)])
                     for i, t in enumerate(times)]
    _animate(figure, times, [replica.name for replica in shown], height, first)
    return figure


def selected_frame(z: np.ndarray) -> int | None:
    """Index of the frame where the selected request holds the most blocks (state codes; the
    first on ties); None when it holds none in any frame."""
    held = (z == SELECTED).reshape(len(z), -1).sum(axis=1)
    return int(np.argmax(held)) if held.any() else None


def peak_frame(z: np.ndarray, percent: bool) -> int:
    """Index of the frame with the most blocks in use (the first on ties); `z` holds state
    codes (any code > 0 is a used block) or, when `percent`, the share in use per super-cell."""
    used = np.where(z > 0, z.astype(np.int32), 0) if percent else (z > 0) & (z != CACHED)
    return int(np.argmax(used.reshape(len(z), -1).sum(axis=1)))


def _run_end(result: SimulationResult) -> float:
    done = result.requests["completed_at"]
    return float(done.max()) if done.notna().any() else 0.0


def _grid(frames: BlockFrames, group: int, cells: int, width: int,
          num_blocks: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Frames of a replica of `num_blocks` blocks laid out as (F, rows, width) arrays of `cells`
    cells (then padding to whole rows): state codes or percentages, and owners. `frames` may
    cover only the blocks the run touched; the rest of the replica's cells are free, cells past
    them (-1) are no block."""
    if group > 1:
        values = super_cells(frames.states, group, num_blocks)
    else:
        untouched = num_blocks - frames.states.shape[1]
        values = np.pad(frames.states, ((0, 0), (0, untouched)), constant_values=FREE)
    pad = -(-cells // width) * width - values.shape[1]
    shape = (len(frames.times), -1, width)
    z = np.pad(values, ((0, 0), (0, pad)), constant_values=-1).reshape(shape)
    if group > 1:
        return z, None
    # float32 with NaN for "no owner": plotly's JSON escapes every "/" of base64 data as \u002f,
    # and integer -1 (all one-bits) is mostly "/"; NaN's bytes encode without any
    owners = np.pad(frames.owners, ((0, 0), (0, untouched + pad)), constant_values=-1).reshape(shape).astype(np.float32)
    owners[owners < 0] = np.nan
    return z, owners


def _stack(grids: list[np.ndarray], height: int) -> np.ndarray:
    """Replicas one above the other (replica 0 on top), separated by one empty row."""
    gap = np.full((grids[0].shape[0], 1, grids[0].shape[2]), -1, dtype=grids[0].dtype)
    parts = []
    for grid in grids:
        parts.extend([grid, gap])
    return np.concatenate(parts[:-1], axis=1)


def _heatmap(z: np.ndarray, owners: np.ndarray | None, group: int, width: int, height: int,
             held: bool = True) -> go.Heatmap:
    """One layer of the block map. With one block a cell there are two, so that each hover says
    the right thing: the blocks a request holds (`held`: states, NaN elsewhere, with their owners)
    and the blocks none holds (free or cached; NaN elsewhere). A NaN cell draws nothing and,
    with hoverongaps off, shows no hover."""
    rows = z.shape[0]
    block_ids = (np.arange(rows)[:, None] % (height + 1)) * width + np.arange(width)[None, :]
    if group == 1:
        scale, zmin, zmax = _state_scale(), -1, len(STATE_NAMES) - 1
        hover = ("block %{text}<br>request %{customdata:.0f}<extra></extra>" if held
                 else "block %{text}<br>held by no request<extra></extra>")
        colorbar = None                      # a legend entry per present state instead
    else:
        scale, zmin, zmax = _percent_scale(), -1, 100
        hover = f"blocks %{{text}} .. +{group - 1}<br>%{{z}}% in use<extra></extra>"
        block_ids = block_ids * group
        colorbar = {"title": {"text": "% used"}, "len": 0.7, "y": 0.64}
    return go.Heatmap(z=z, customdata=owners, text=block_ids.astype(np.int32), hovertemplate=hover,
                      colorscale=scale, zmin=zmin, zmax=zmax, colorbar=colorbar, xgap=1, ygap=1,
                      showscale=colorbar is not None, hoverongaps=False,
                      name="blocks" if held else "blocks held by no request")


def _percent_scale() -> list:
    """-1 (no cell) transparent, 0 grey, 1..100 light to dark blue."""
    clear, grey = "rgba(0,0,0,0)", "#eceff1"
    return [[0, clear], [0.005, clear], [0.005, grey], [0.015, grey], [0.015, "#c6dbef"], [1, "#08306b"]]


def _state_scale() -> list:
    """A stepped colour scale over codes -1 (no block) .. 6."""
    colors = ["rgba(0,0,0,0)", *STATE_COLORS]
    n = len(colors)
    scale = []
    for i, color in enumerate(colors):
        scale += [[i / n, color], [(i + 1) / n, color]]
    return scale


def _add_utilization(figure: go.Figure, result: SimulationResult, shown: Sequence[ReplicaInfo], t0: float) -> None:
    figure.add_trace(_time_marker(t0).update(axes(2)))
    restarts = preemptions(result)
    for replica in shown:
        r, name = replica.id, replica.name
        util = utilization(result, r)
        color = UTIL_COLORS[r % len(UTIL_COLORS)]
        times, fractions = step_peaks(util["time"].to_numpy(), util["fraction"].to_numpy(np.float32))
        figure.add_trace(go.Scatter(x=times, y=fractions, mode="lines", line={"shape": "hv",
                                    "color": color, "width": 1.5}, name=f"{name} KV use",
                                    hovertemplate="%{x:.3f} s: %{y:.0%}<extra></extra>", **axes(2)))
        swaps = swap_use(result, r)
        if len(swaps):
            times, fractions = step_peaks(swaps["time"].to_numpy(), swaps["fraction"].to_numpy(np.float32))
            figure.add_trace(go.Scatter(x=times, y=fractions, mode="lines", line={"shape": "hv", "color": color,
                                        "width": 1.5, "dash": "dot"}, name=f"{name} CPU swap use",
                                        hovertemplate="%{x:.3f} s: %{y:.0%} of the swap space<extra></extra>",
                                        **axes(2)))
        offload = offload_use(result, r)
        if len(offload):
            times, fractions = step_peaks(offload["time"].to_numpy(), offload["fraction"].to_numpy(np.float32))
            figure.add_trace(go.Scatter(x=times, y=fractions, mode="lines", line={"shape": "hv", "color": color,
                                        "width": 1.5, "dash": "dash"}, name=f"{name} CPU offload use",
                                        hovertemplate="%{x:.3f} s: %{y:.0%} of the CPU offload tier"
                                                      "<extra></extra>", **axes(2)))
        mine = restarts[restarts["replica"] == r]
        if len(mine):
            xs, counts = preemption_marks(mine["time"].to_numpy(np.float64))
            at = np.searchsorted(util["time"].to_numpy(), xs, side="right") - 1
            figure.add_trace(go.Scatter(
                x=xs, y=util["fraction"].to_numpy()[np.maximum(at, 0)], mode="markers",
                marker={"symbol": "x", "size": 9, "color": color, "line": {"width": 1}},
                name=f"{name} preemption", customdata=counts,
                hovertemplate="%{customdata} preemption(s) from %{x:.3f} s<extra></extra>", **axes(2)))


def preemption_marks(times: np.ndarray, max_marks: int = MAX_MARKS) -> tuple[np.ndarray, np.ndarray]:
    """(time, count) of the preemption markers: one per preemption, or, with more than
    `max_marks`, one per non-empty bin of `max_marks` equal bins over their span, at the bin's
    first preemption (so thousands of markers do not merge into a band)."""
    times = np.sort(times)
    if len(times) <= max_marks:
        return times, np.ones(len(times), dtype=np.int64)
    edges = np.linspace(times[0], times[-1], max_marks + 1)
    bins = np.minimum(np.searchsorted(edges, times, side="right") - 1, max_marks - 1)
    first = np.flatnonzero(np.diff(bins, prepend=-1))
    return times[first], np.diff(np.append(first, len(times)))


def map_margin(figure_height: int) -> dict[str, int]:
    """Margins that hold the replica names, the buttons and scrubber above the map and the legend
    below it, so that the browser lays the map out once (see CDF_MARGIN in viz/overview.py). The
    buttons (y = 1.16) and the legend (y = -0.12) sit at fractions of the plot's height, so the
    top and bottom margins grow with it: the plot is about what the figure's height leaves of them."""
    plot = (figure_height - 84) / 1.28
    top = max(math.ceil(0.16 * plot) + 24, math.ceil(0.02 * plot) + 106)   # the buttons, or the scrubber (y = 1.02)
    return {"l": 86, "r": 10, "t": top, "b": math.ceil(0.12 * plot) + 60}


def _time_marker(t: float) -> go.Scatter:
    return go.Scatter(x=[t, t], y=[0, 1], mode="lines", line={"color": "#333", "dash": "dot", "width": 1},
                      name="now", showlegend=False, hoverinfo="skip")


def _animate(figure: go.Figure, times: np.ndarray, names: list[str], height: int, first: int) -> None:
    """Play / pause buttons, the time slider, and one y tick per replica grid (`names`, top down)."""
    play = {"frame": {"duration": FRAME_MS, "redraw": True}, "fromcurrent": True, "transition": {"duration": 0}}
    pause = {"frame": {"duration": 0, "redraw": False}, "mode": "immediate", "transition": {"duration": 0}}
    figure_height = 300 + 22 * len(names) * (height + 1)
    figure.update_layout(
        height=figure_height, margin=map_margin(figure_height),
        updatemenus=[{"type": "buttons", "direction": "left", "x": 0.0, "y": 1.16, "xanchor": "left",
                      "showactive": False, "buttons": [
                          {"label": "▶ Play", "method": "animate", "args": [None, play]},
                          {"label": "❚❚ Pause", "method": "animate", "args": [[None], pause]}]}],
        # the scrubber spans the plot's width, like the time axis below it (the frames' window)
        sliders=[{"active": first, "x": 0.0, "len": 1.0, "y": 1.02, "yanchor": "bottom", "pad": {"l": 0, "r": 0},
                  "currentvalue": {"prefix": "t = ", "suffix": " s"},
                  "steps": [{"label": f"{t:.2f}", "method": "animate",
                             "args": [[f"{t:.3f}"], {**pause, "frame": {"duration": 0, "redraw": True}}]}
                            for t in times]}],
        legend={"orientation": "h", "y": -0.12}, showlegend=True)
    tick_rows = [r * (height + 1) + (height - 1) / 2 for r in range(len(names))]
    figure.update_layout(xaxis={"showticklabels": False, "showgrid": False, "zeroline": False},
                         yaxis={"autorange": "reversed", "tickvals": tick_rows, "ticktext": names, "showgrid": False,
                                "zeroline": False},
                         xaxis2={"title": {"text": "time (s)"}, "range": [float(times[0]), float(times[-1])]},
                         yaxis2={"title": {"text": "KV in use"}, "tickformat": ".0%", "range": [0, 1.05]})
