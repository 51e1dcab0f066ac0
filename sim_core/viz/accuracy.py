"""Accuracy figures: a measured run's latencies against the simulated ones, as CDFs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sim_core.viz.overview import LEGEND_BELOW, PALETTE, cdf_points
from sim_core.viz.units import duration_unit

PANELS = (("ttft", "TTFT"), ("e2e", "end-to-end"))


def measured_vs_simulated_cdfs(measured: pd.DataFrame, simulated: pd.DataFrame) -> go.Figure:
    """One panel per latency (TTFT, E2E), a `measured` and a `simulated` line in each.

    Args:
        measured: the run's per-request table (columns `ttft`, `e2e` in seconds; NaN for
            requests that failed, which are left out).
        simulated: the replay's requests table (`ttft`, `e2e`, `status`); only finished
            requests count, as the client counts only answered ones.
    """
    figure = make_subplots(rows=1, cols=len(PANELS), shared_yaxes=True, horizontal_spacing=0.05)
    finished = simulated[simulated["status"] == "finished"]
    for col, (column, title) in enumerate(PANELS, start=1):
        lines = {"measured": measured[column].to_numpy(np.float64, na_value=np.nan),
                 "simulated": finished[column].to_numpy(np.float64, na_value=np.nan)}
        largest = max((float(np.nanmax(v)) for v in lines.values() if np.isfinite(v).any()), default=0.0)
        unit, size = duration_unit(largest)
        for i, (name, seconds) in enumerate(lines.items()):
            xs, ys = cdf_points(seconds / size)
            style = {"shape": "hv", "color": PALETTE[i], "dash": "solid" if name == "measured" else "dash"}
            figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, legendgroup=name, showlegend=col == 1,
                                        line=style,
                                        hovertemplate=f"{title} %{{x:.3g}} {unit}: %{{y:.1%}}<extra>{name}</extra>"),
                             1, col)
        figure.update_xaxes(title_text=f"{title} ({unit})", rangemode="tozero", row=1, col=col)
    figure.update_yaxes(tickformat=".0%", range=[0, 1.02], row=1, col=1)
    figure.update_layout(height=300, margin={"l": 10, "r": 10, "t": 10, "b": 40}, legend=LEGEND_BELOW | {"y": -0.3})
    return figure
