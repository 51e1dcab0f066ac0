"""Overview figures: latency CDFs, throughput and queues over time, load per replica."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim_core.portable_math import dot
from sim_core.viz.decimate import step_peaks
from sim_core.viz.grid import axes, axis_names, grid_figure
from sim_core.viz.units import duration_unit

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

LATENCIES = (("ttft", "TTFT"), ("tpot", "TPOT (mean TBT)"), ("tbt_max", "worst TBT"), ("e2e", "end-to-end"))
LEGEND_BELOW = {"orientation": "h", "y": -0.12, "yanchor": "top", "x": 0}   # outside the plot: hides no data
# Margins that already hold each chart's tick labels, axis titles and legend as the app draws
# them (measured in the browser at 300-20,000 requests, plus slack): plotly's automargin, which
# stays on, then has nothing to grow, and the browser lays a chart out once instead of drawing
# it, growing the margins and drawing it all again (half of a chart's drawing time). A chart
# whose labels need more still gets it, at the cost of that second pass.
CDF_MARGIN = {"l": 50, "r": 10, "t": 16, "b": 68}
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f")


def cdf_points(values: np.ndarray, max_points: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """(sorted values, cumulative fraction) of the finite values, thinned to about max_points
    evenly spaced quantiles (the last point, the maximum, is always kept)."""
    values = np.sort(values[np.isfinite(values)])
    if not len(values):
        return values, values
    fractions = np.arange(1, len(values) + 1) / len(values)
    if len(values) > max_points:
        keep = np.unique(np.linspace(0, len(values) - 1, max_points).astype(np.int64))
        values, fractions = values[keep], fractions[keep]
    return values, fractions


def latency_cdfs(runs: dict[str, pd.DataFrame]) -> go.Figure:
    """One panel per latency, one line per run (name -> requests table); each panel's x axis in
    the unit its largest value reads best in (ms, s, min, h)."""
    figure = grid_figure(1, len(LATENCIES), shared_yaxes=True, horizontal_spacing=0.04)
    finished = {name: requests[requests["status"] == "finished"] for name, requests in runs.items()}
    for col, (column, title) in enumerate(LATENCIES, start=1):
        values = {name: rows[column].to_numpy(dtype=np.float64, na_value=np.nan) for name, rows in finished.items()}
        largest = max((float(np.nanmax(v)) for v in values.values() if np.isfinite(v).any()), default=0.0)
        unit, size = duration_unit(largest)
        for i, (name, seconds) in enumerate(values.items()):
            xs, ys = cdf_points(seconds / size)
            figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"shape": "hv", "color": PALETTE[i % 8]},
                                        name=name, legendgroup=name, showlegend=col == 1, **axes(col),
                                        hovertemplate=f"{title} %{{x:.3g}} {unit}: %{{y:.1%}}<extra>{name}</extra>"))
        figure.update_layout({axis_names(col)[0]: {"title": {"text": f"{title} ({unit})"}, "rangemode": "tozero"}})
    figure.update_layout(yaxis={"tickformat": ".0%", "range": [0, 1.02]})
    several = {"r": 20, "b": 100}        # the legend's row below, and the last tick's overhang beside it
    figure.update_layout(height=300, margin=CDF_MARGIN | (several if len(runs) > 1 else {}),
                         legend=LEGEND_BELOW | {"y": -0.3}, showlegend=len(runs) > 1)
    return figure


def run_latency_cdfs(result: SimulationResult) -> go.Figure:
    """`latency_cdfs` of one run, named after its scenario."""
    return latency_cdfs({result.config.name or "scenario": result.requests})


def throughput_series(result: SimulationResult, bin_s: float | None = None) -> pd.DataFrame:
    """Finished requests/s and output tokens/s per time bin (bins of bin_s, default ~100 bins)."""
    done = result.requests["completed_at"].dropna().to_numpy()
    end = float(done.max()) if len(done) else 1.0
    bin_s = bin_s or max(end / 100, 1e-3)
    edges = np.arange(0.0, end + bin_s, bin_s)
    finished = np.histogram(done, edges)[0] / bin_s
    batches = result.batches
    decode_tokens = (batches["num_tokens"] - batches["num_prefill_tokens"]).to_numpy()
    tokens = np.histogram(batches["completed_at"].to_numpy(dtype=np.float64, na_value=np.nan), edges,
                          weights=decode_tokens)[0] / bin_s if len(batches) else np.zeros(len(edges) - 1)
    return pd.DataFrame({"time": edges[:-1], "requests_per_s": finished, "output_tokens_per_s": tokens})


def throughput_figure(result: SimulationResult) -> go.Figure:
    """Finished requests/s (left axis) and output tokens/s (right axis) over time."""
    series = throughput_series(result)
    figure = grid_figure(secondary_y=True)      # tokens/s on the right axis, "y2"
    figure.add_trace(go.Scatter(x=series["time"], y=series["output_tokens_per_s"], name="output tokens/s",
                                line={"shape": "hv", "color": PALETTE[0]}, xaxis="x", yaxis="y2"))
    figure.add_trace(go.Bar(x=series["time"], y=series["requests_per_s"], name="finished requests/s",
                            marker={"color": PALETTE[1]}, opacity=0.6, xaxis="x", yaxis="y"))
    figure.update_layout(height=320, bargap=0, margin={"l": 72, "r": 56, "t": 18, "b": 70}, legend=LEGEND_BELOW,
                         xaxis={"ticksuffix": " s", "rangemode": "tozero"})
    figure.update_layout(yaxis={"title": {"text": "requests/s"}, "rangemode": "tozero"},
                         yaxis2={"title": {"text": "tokens/s"}, "rangemode": "tozero", "showgrid": False})
    return figure


def queue_figure(result: SimulationResult) -> go.Figure:
    """Waiting and running requests per replica over time (step lines, peaks kept)."""
    series, names = result.timeseries, [replica.name for replica in result.replicas]
    figure = go.Figure()
    for replica, rows in series.groupby("replica_id"):
        times = rows["time"].to_numpy()
        for column, dash in (("num_waiting", "solid"), ("num_running", "dot")):
            xs, ys = step_peaks(times, rows[column].to_numpy(np.int32), max_points=600)
            figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=f"{names[int(replica)]} {column[4:]}",
                                        line={"shape": "hv", "dash": dash, "color": PALETTE[int(replica) % 8]}))
    figure.update_layout(height=320, xaxis={"ticksuffix": " s", "rangemode": "tozero"},
                         yaxis={"title": {"text": "requests"}, "rangemode": "tozero"},
                         margin={"l": 80, "r": 10, "t": 12, "b": 66 + 22 * -(-len(names) // 2)},  # 4 entries a row
                         legend=LEGEND_BELOW)
    return figure


def replica_load(result: SimulationResult) -> pd.DataFrame:
    """Per replica (id order): its name ("replica 0", or with P/D "prefill 0" / "decode 1"),
    requests served, prompt and output tokens, batches, mean KV utilization (of its own blocks).
    A request counts on the replica it ended on (with P/D disaggregation its decode replica,
    unless it had one output token)."""
    requests, series = result.requests, result.timeseries
    on, prompt, output = (requests[c].to_numpy() for c in ("replica_id", "num_prefill_tokens", "num_decode_tokens"))
    series_on, times, used = (series[c].to_numpy() for c in ("replica_id", "time", "kv_blocks_used"))
    batch_on = result.batches["replica_id"].to_numpy()
    rows = []
    for replica in result.replicas:     # numpy masks, not DataFrame filters: 20,000 requests in a few ms
        mine, samples = on == replica.id, series_on == replica.id
        rows.append({"replica": replica.id, "name": replica.name, "requests": int(mine.sum()),
                     "prompt_tokens": int(prompt[mine].sum()), "output_tokens": int(output[mine].sum()),
                     "batches": int((batch_on == replica.id).sum()),
                     "kv_utilization_mean": _time_mean(times[samples], used[samples]) / max(replica.num_blocks, 1)})
    return pd.DataFrame(rows)


def blocks_text(result: SimulationResult) -> str:
    """KV blocks per replica for display: "1,024", or per pool ("prefill 64 / decode 100")."""
    if not result.pools:
        return f"{result.num_blocks:,}"
    return " / ".join(f"{pool.name} {pool.num_blocks:,}" for pool in result.pools)


def _time_mean(times: np.ndarray, values: np.ndarray) -> float:
    """Mean of a step function over [times[0], times[-1]]."""
    if len(times) < 2 or times[-1] <= times[0]:
        return float(values[-1]) if len(values) else 0.0
    return dot(values[:-1], np.diff(times)) / float(times[-1] - times[0])


def replica_load_figure(result: SimulationResult, load: pd.DataFrame | None = None) -> go.Figure:
    """Each replica's share of the requests and of the tokens (prompt + output), and its mean
    KV use, as grouped bars on one percent axis (one axis draws fast); with even load every
    share sits on the dotted 1/n line. `load`: `replica_load(result)`, when the caller has it."""
    load = replica_load(result) if load is None else load
    names = [replica.name for replica in result.replicas]
    tokens = load["prompt_tokens"] + load["output_tokens"]
    series = (("share of requests", load["requests"] / max(int(load["requests"].sum()), 1)),
              ("share of tokens", tokens / max(int(tokens.sum()), 1)),
              ("mean KV use", load["kv_utilization_mean"]))
    figure = go.Figure([go.Bar(x=names, y=values.to_numpy(np.float64), name=label, marker={"color": PALETTE[i]},
                               hovertemplate=f"%{{x}} {label}: %{{y:.1%}}<extra></extra>")
                        for i, (label, values) in enumerate(series)])
    figure.add_hline(y=1 / max(len(names), 1), line={"dash": "dot", "color": "#888", "width": 1})
    figure.update_layout(barmode="group", height=300, yaxis={"tickformat": ".0%", "rangemode": "tozero"},
                         legend=LEGEND_BELOW | {"y": -0.15}, margin={"l": 50, "r": 10, "t": 18, "b": 75})
    return figure


def replica_load_views(result: SimulationResult) -> tuple[pd.DataFrame, go.Figure]:
    """The per-replica table (`replica_load`) and its figure, the table computed once for both
    (it walks every request and time-series sample: 30 ms at 20,000 requests)."""
    load = replica_load(result)
    return load, replica_load_figure(result, load)
