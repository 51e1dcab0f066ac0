"""Compare figures: several runs of the same workload overlaid (one colour per run), and their
request timelines stacked on one time axis for the same request ids."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sim_core.viz.decimate import step_peaks
from sim_core.viz.margins import label_margin
from sim_core.viz.overview import PALETTE, throughput_series
from sim_core.viz.timeline import timeline_figure

LAYOUT = {"height": 300, "margin": {"l": 86, "r": 20, "t": 36, "b": 68}, "xaxis_title": "time (s)",
          "legend": {"orientation": "h", "y": 1.12}}


def cluster_series(timeseries: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(times, sum over replicas) of a per-replica step series (each replica keeps its last value
    until it changes)."""
    if not len(timeseries):
        return np.empty(0), np.empty(0)
    wide = timeseries.pivot_table(index="time", columns="replica_id", values=column, aggfunc="last")
    return wide.index.to_numpy(np.float64), wide.ffill().fillna(0).sum(axis=1).to_numpy(np.float64)


def _overlay(lines: dict[str, tuple[np.ndarray, np.ndarray]], yaxis: str, shape: str = "hv") -> go.Figure:
    figure = go.Figure()
    for i, (name, (xs, ys)) in enumerate(lines.items()):
        figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name,
                                    line={"shape": shape, "color": PALETTE[i % len(PALETTE)]}))
    figure.update_layout(yaxis_title=yaxis, **LAYOUT)
    return figure


def throughput_overlay(runs: dict) -> go.Figure:
    """Output tokens/s over time per run, on common time bins."""
    end = max((float(r.requests["completed_at"].max()) for r in runs.values()
               if r.requests["completed_at"].notna().any()), default=1.0)
    lines = {}
    for name, run in runs.items():
        series = throughput_series(run, bin_s=max(end / 100, 1e-3))
        lines[name] = (series["time"].to_numpy(), series["output_tokens_per_s"].to_numpy())
    return _overlay(lines, "output tokens/s")


def queue_overlay(runs: dict) -> go.Figure:
    """Requests waiting (all replicas together) over time per run."""
    return _overlay({name: step_peaks(*cluster_series(run.timeseries, "num_waiting")) for name, run in runs.items()},
                    "waiting requests")


def kv_overlay(runs: dict) -> go.Figure:
    """KV-cache blocks in use as a share of the cluster's blocks, over time per run."""
    lines = {}
    for name, run in runs.items():
        times, used = cluster_series(run.timeseries, "kv_blocks_used")
        total = max(sum(replica.num_blocks for replica in run.replicas), 1)
        lines[name] = step_peaks(times, used / total)
    figure = _overlay(lines, "KV blocks in use")
    figure.update_yaxes(tickformat=".0%")
    return figure


def preemption_overlay(runs: dict) -> go.Figure:
    """Cumulative preemptions (restarts) over time per run (needs runs recorded with `full`)."""
    lines = {}
    for name, run in runs.items():
        states = run.state_events
        times = np.sort(states.loc[states["state"].astype(str) == "restarted", "time"].to_numpy(np.float64))
        lines[name] = (np.concatenate(([0.0], times)), np.arange(len(times) + 1))
    return _overlay(lines, "preemptions so far")


def synced_timelines(runs: dict, request_ids: list[int]) -> go.Figure:
    """The same requests' lifecycles in each run (one panel per run, shared time axis, rows in
    the order of `request_ids`); needs runs recorded with `full`."""
    names, labels = list(runs), []
    figure = make_subplots(rows=len(names), cols=1, shared_xaxes=True, subplot_titles=names,
                           vertical_spacing=min(0.08, 0.3 / max(len(names), 1)))
    for row, name in enumerate(names, start=1):
        run = runs[name]
        table = run.requests.set_index("request_id", drop=False)
        picked = table.loc[[i for i in request_ids if i in table.index]].reset_index(drop=True)
        single = timeline_figure(run, picked)
        labels += single.layout.yaxis.categoryarray
        for trace in single.data:
            trace.update(legendgroup=trace.name, showlegend=row == 1)
            figure.add_trace(trace, row=row, col=1)
        figure.update_yaxes(type="category", categoryorder="array", categoryarray=single.layout.yaxis.categoryarray,
                            row=row, col=1)
    height = 120 + len(names) * (40 + 14 * max(len(request_ids), 1))
    # the legend sits 4% of the plot's height above it: the top margin holds that and its row
    top = max(40, math.ceil((0.04 * (height - 68) + 16) / 1.04))
    figure.update_layout(barmode="overlay", height=height,
                         margin={"l": label_margin(labels), "r": 20, "t": top, "b": 68},
                         legend={"orientation": "h", "y": 1.04})
    figure.update_xaxes(title_text="time (s)", row=len(names), col=1)
    return figure
