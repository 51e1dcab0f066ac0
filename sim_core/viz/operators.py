"""Where the stage time goes: the run's seconds per cost-model operator as sorted bars."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from sim_core.viz.margins import label_margin

GROUPS = (("cpu_", "#9c755f"), ("attn_prefill", "#f28e2b"), ("attn_decode", "#e15759"), ("attn_", "#4e79a7"),
          ("mlp_", "#59a14f"), ("moe_", "#59a14f"), ("tp_", "#b07aa1"), ("pp_", "#b07aa1"))
OTHER = "#bab0ac"


def operator_color(name: str) -> str:
    """Colour by family: host CPU, prefill attention, decode attention, other attention, MLP,
    communication; everything else grey."""
    return next((color for prefix, color in GROUPS if name.startswith(prefix)), OTHER)


def operator_time_figure(table: pd.DataFrame, top: int = 20) -> go.Figure:
    """Horizontal bars of the `top` largest operators (seconds and share of all stage time)."""
    rows = table.head(top).iloc[::-1]  # largest at the top
    figure = go.Figure(go.Bar(
        x=rows["seconds"].to_numpy(), y=rows["operator"].tolist(), orientation="h",
        marker={"color": [operator_color(name) for name in rows["operator"]]},
        customdata=rows["share"].to_numpy(), hovertemplate="%{y}: %{x:.3f} s (%{customdata:.1%})<extra></extra>",
        text=[f"{share:.1%}" for share in rows["share"]], textposition="outside", cliponaxis=False))
    figure.update_layout(height=max(220, 22 * len(rows) + 60),
                         margin={"l": label_margin(rows["operator"]), "r": 40, "t": 10, "b": 68},
                         xaxis_title="seconds of stage time (all replicas and stages)")
    return figure
