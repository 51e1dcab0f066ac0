"""The memory planner's budget of one GPU as a stacked bar, and its headline numbers."""

from __future__ import annotations

import plotly.graph_objects as go

GIB = 1024**3
PARTS = (("weights", "#4e79a7"), ("activations", "#f28e2b"), ("KV cache", "#59a14f"),
         ("margin (reserve)", "#bab0ac"), ("unused", "#eceff1"))


def memory_parts(plan) -> dict[str, float]:
    """Bytes per part of one GPU's memory; they add up to the device's capacity. `KV cache` is
    what the planned blocks take; `unused` is what is left after rounding to whole blocks."""
    kv_used = min(plan.kv_bytes, plan.num_blocks * plan.kv_bytes_per_block)
    parts = {"weights": plan.weight_bytes, "activations": plan.activation_bytes, "KV cache": max(kv_used, 0.0),
             "margin (reserve)": plan.margin_bytes}
    parts["unused"] = max(plan.device_bytes - sum(parts.values()), 0.0)
    return parts


def memory_facts(plan, block_size: int) -> dict[str, str]:
    """The numbers a user sizes a deployment with, formatted for display."""
    return {"planner": plan.planner, "KV blocks per replica": f"{plan.num_blocks:,}",
            "KV capacity (tokens)": f"{plan.num_blocks * block_size:,}",
            "KV bytes per block": f"{plan.kv_bytes_per_block / 1024**2:.2f} MiB",
            "max batch at max_model_len": f"{plan.max_batch_size:,}",
            "blocks per max-length request": f"{plan.blocks_per_request:,}"}


def memory_figure(plan, label: str) -> go.Figure:
    """One horizontal stacked bar (GiB) of the GPU that decides the plan."""
    figure = go.Figure()
    for name, color in PARTS:
        value = memory_parts(plan)[name] / GIB
        figure.add_trace(go.Bar(y=[label], x=[value], name=name, orientation="h", marker={"color": color},
                                text=[f"{name}<br>{value:.1f} GiB" if value >= 2 else ""], textposition="inside",
                                hovertemplate=f"{name}: %{{x:.2f}} GiB<extra></extra>"))
    figure.update_layout(barmode="stack", height=220, xaxis_title="GiB", legend={"orientation": "h", "y": -0.4},
                         margin={"l": 10, "r": 10, "t": 20, "b": 40},
                         xaxis={"range": [0, plan.device_bytes / GIB]})
    return figure
