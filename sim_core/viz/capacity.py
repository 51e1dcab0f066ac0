"""Capacity-planning figures: a Pareto view of a sweep's results and the probes of one search."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim_core.sweep.pareto import config_label, pareto_mask
from sim_core.sweep.probe import Probe, severity
from sim_core.sweep.search import overruled
from sim_core.viz.overview import PALETTE

# (title, x column, x better, y column, y better, x title, y title)
PARETO_VIEWS = {
    "QPS per GPU vs TBT p99": ("tbt_p99_s", "min", "qps_per_gpu", "max", "TBT p99 at capacity (s)", "QPS per GPU"),
    "capacity vs cost": ("cost_per_hour_usd", "min", "max_qps", "max", "cost (USD per hour)", "capacity (req/s)"),
    "QPS per dollar vs TTFT p90": ("ttft_p90_s", "min", "qps_per_usd", "max", "TTFT p90 at capacity (s)",
                                   "QPS per USD-hour"),
}


def pareto_figure(table: pd.DataFrame, vary_keys: list[str], view: str = "capacity vs cost") -> go.Figure:
    """Every configuration that serves some load as a grey dot, the Pareto front (no other is
    better on both axes) as a line of coloured markers; hover names the configuration."""
    x, x_better, y, y_better, x_title, y_title = PARETO_VIEWS[view]
    served = table[table["max_qps"] > 0]
    xs = pd.to_numeric(served[x], errors="coerce").to_numpy(np.float64)
    ys = pd.to_numeric(served[y], errors="coerce").to_numpy(np.float64)
    labels = np.array([html.escape(config_label(row, vary_keys)) for _, row in served.iterrows()],  # hover is HTML
                      dtype=object)
    front = pareto_mask(xs, ys, x_better, y_better)
    order = np.argsort(xs[front], kind="stable")
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=xs[~front], y=ys[~front], mode="markers", name="dominated", text=labels[~front],
                                marker={"color": "#bab0ac", "size": 8},
                                hovertemplate="%{text}<br>%{x:.3g}, %{y:.3g}<extra></extra>"))
    figure.add_trace(go.Scatter(x=xs[front][order], y=ys[front][order], mode="lines+markers", name="Pareto front",
                                text=labels[front][order], marker={"color": PALETTE[0], "size": 11},
                                line={"shape": "hv", "color": PALETTE[0]},
                                hovertemplate="%{text}<br>%{x:.3g}, %{y:.3g}<extra>front</extra>"))
    figure.update_layout(height=380, xaxis_title=x_title, yaxis_title=y_title,
                         margin={"l": 10, "r": 10, "t": 30, "b": 40}, legend={"orientation": "h", "y": 1.1})
    return figure


def probe_figure(record: dict, slo: dict) -> go.Figure:
    """The rates one search tried, in order (a dotted path; green dots met every SLO, red ones
    missed one; diamonds are the longer confirming probes; a doubtful failure that the reseeded
    probe after it overruled says so on hover), with its answer as a dashed line; each has a
    legend entry. The log rate axis
    spans the probes (and the answer) with a margin of half a step either side."""
    probes = record["probes"]
    rates = np.array([p[0] for p in probes], dtype=np.float64)
    order = np.arange(1, len(probes) + 1)
    lengths = np.array([p[5] if len(p) > 5 else 1 for p in probes], dtype=np.int64)   # older records: 1
    overrules = overruled([_probe(p) for p in probes], lambda probe: severity(probe, slo))
    why = np.array([("meets " + ", ".join(slo) if p[1] else "misses: " + ", ".join(p[3]))
                    + (f"<br>confirming probe, {n}x longer" if n > 1 else "")
                    + ("<br>overruled by seed +1" if i in overrules else "")
                    for i, (p, n) in enumerate(zip(probes, lengths))], dtype=object)
    symbols = np.where(lengths > 1, "diamond", "circle")
    passed = np.array([bool(p[1]) for p in probes], dtype=bool)
    hover = "probe %{y}: %{x:.4g} req/s<br>%{text}<extra></extra>"
    figure = go.Figure(go.Scatter(x=rates, y=order, mode="lines", line={"color": "#bab0ac", "dash": "dot"},
                                  name="search order", hoverinfo="skip"))
    for mask, name, color in ((passed, "meets every SLO", PALETTE[2]), (~passed, "misses an SLO", PALETTE[3])):
        figure.add_trace(go.Scatter(x=rates[mask], y=order[mask], mode="markers", text=why[mask], name=name,
                                    marker={"size": 11, "color": color, "symbol": symbols[mask].tolist()},
                                    hovertemplate=hover))
    shown = rates[rates > 0]
    if record["max_qps"] > 0:
        figure.add_trace(go.Scatter(x=[record["max_qps"]] * 2, y=[0.5, len(probes) + 0.5], mode="lines",
                                    name=f"capacity {record['max_qps']:.3g} req/s", hoverinfo="skip",
                                    line={"color": PALETTE[0], "dash": "dash"}))
        shown = np.append(shown, record["max_qps"])
    # a shape on a log axis takes log10 coordinates, so the answer is a trace and the range is set here
    span = [float(np.log10(shown.min())) - 0.15, float(np.log10(shown.max())) + 0.15] if len(shown) else None
    figure.update_layout(height=300, xaxis={"type": "log", "title": "arrival rate (req/s)", "range": span},
                         yaxis={"title": "probe", "autorange": "reversed", "dtick": 1},
                         legend={"orientation": "h", "y": -0.25, "yanchor": "top", "x": 0},
                         margin={"l": 10, "r": 10, "t": 10, "b": 10})
    return figure


def _probe(stored: list) -> Probe:
    """A probe from its record (`Probe.to_json`; older records lack the repeat and length)."""
    return Probe(stored[0], bool(stored[1]), stored[2], tuple(stored[3]),
                 stored[4] if len(stored) > 4 else 0, stored[5] if len(stored) > 5 else 1)
