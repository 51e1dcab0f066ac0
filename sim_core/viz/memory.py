"""The memory planner's budget per pipeline stage as stacked bars, and its headline numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

from sim_core.viz.margins import label_margin

if TYPE_CHECKING:
    from sim_core.memory import MemoryBreakdown, MemoryPlan

GIB = 1024**3
PARTS = (("weights", "weights", "#4e79a7"), ("activations", "activations", "#f28e2b"),
         ("kv_cache", "KV cache", "#59a14f"), ("reserve", "framework reserve", "#b07aa1"),
         ("non_torch", "non-torch", "#b07aa1"), ("cuda_graphs", "CUDA graphs", "#e15759"),
         ("margin", "margin", "#bab0ac"), ("unused", "unused", "#eceff1"))


def memory_facts(breakdown: MemoryBreakdown, plan: MemoryPlan) -> dict[str, str]:
    """The numbers a user sizes a deployment with, formatted for display."""
    return {"planner": breakdown.planner, "KV blocks per replica": f"{breakdown.num_blocks:,}",
            "KV capacity (tokens)": f"{breakdown.kv_token_capacity:,}",
            "KV bytes per block": f"{plan.kv_bytes_per_block / 1024**2:.2f} MiB",
            "max batch at max_model_len": f"{breakdown.max_batch_size:,}",
            "blocks per max-length request": f"{plan.blocks_per_request:,}"}


def memory_parts(breakdown: MemoryBreakdown, plan: MemoryPlan) -> dict[str, str]:
    """The planner's budget of the GPU that decides, in GiB, part by part (what the bars draw)."""
    stage = min(breakdown.stages, key=lambda s: s.unused)
    names = {attribute: name for attribute, name, _ in PARTS}
    return {names[part]: f"{getattr(stage, part) / GIB:.2f} GiB" for part in breakdown.components}


def memory_figure(breakdown: MemoryBreakdown, device: str) -> go.Figure:
    """One horizontal stacked bar (GiB) per pipeline stage's GPU; the parts add up to the device."""
    labels = [f"stage {s.stage} ({device})" for s in breakdown.stages]
    figure = go.Figure()
    for attribute, name, color in PARTS:
        if attribute not in breakdown.components:
            continue
        values = [getattr(s, attribute) / GIB for s in breakdown.stages]
        figure.add_trace(go.Bar(y=labels, x=values, name=name, orientation="h", marker={"color": color},
                                text=[f"{name}<br>{v:.1f} GiB" if v >= 0.06 * breakdown.device_bytes / GIB else ""
                                      for v in values], textposition="inside",
                                hovertemplate=f"{name}: %{{x:.2f}} GiB<extra>%{{y}}</extra>"))
    # the unit rides on the ticks and the legend sits above the plot: no axis title for it to cover
    figure.update_layout(barmode="stack", height=160 + 50 * len(labels),
                         legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
                         margin={"l": label_margin(labels), "r": 10, "t": 46, "b": 38},   # legend above, ticks below
                         xaxis={"range": [0, breakdown.device_bytes / GIB], "ticksuffix": " GiB"},
                         yaxis={"autorange": "reversed"})
    return figure
