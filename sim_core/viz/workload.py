"""Workload figures: arrival rate over time, length histograms, prompt/output scatter, and the
validation report as rows (pure functions: Workload in, plotly figures or lists out)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sim_core.workload.model import Workload
from sim_core.workload.report import workload_stats

MAX_POINTS = 5000
NUM_BINS = 60
# holds the axis titles and tick labels (left and below) and the title above: drawn once (viz/margins.py)
WORKLOAD_MARGIN = {"l": 80, "r": 24, "t": 40, "b": 76}


def arrival_rate_figure(workload: Workload, num_bins: int = NUM_BINS) -> go.Figure:
    """Requests per second in equal time bins over the workload's span."""
    times = workload.arrived_at
    span = float(times[-1] - times[0]) if len(times) else 0.0
    width = span / num_bins if span > 0 else 1.0
    counts, edges = np.histogram(times, bins=num_bins if span > 0 else 1,
                                 range=(float(times[0]), float(times[0]) + max(span, 1.0)))
    figure = go.Figure(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=counts / width, width=width,
                              name="arrivals", marker_color="#1b9e77"))
    figure.update_layout(title="Arrival rate over time", xaxis_title="time (s)", yaxis_title="requests / s",
                         bargap=0, height=320, margin=WORKLOAD_MARGIN)
    return figure


def length_histogram_figure(workload: Workload, num_bins: int = NUM_BINS) -> go.Figure:
    """Histograms of prompt and output lengths (tokens), side by side, each on its own axis
    (outputs of tens of tokens stay readable next to prompts of thousands)."""
    figure = make_subplots(rows=1, cols=2, horizontal_spacing=0.12)
    for col, (name, values, color) in enumerate((("prompt", workload.num_prefill_tokens, "#d95f02"),
                                                 ("output", workload.num_decode_tokens, "#7570b3")), start=1):
        counts, edges = np.histogram(values, bins=num_bins)
        figure.add_trace(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, width=np.diff(edges), name=name,
                                marker_color=color, showlegend=False), 1, col)
        figure.update_xaxes(title_text=f"{name} tokens", row=1, col=col)
    figure.update_yaxes(title_text="requests", row=1, col=1)
    figure.update_layout(title="Length histograms", height=320, margin=WORKLOAD_MARGIN)
    return figure


def length_scatter_figure(workload: Workload, max_points: int = MAX_POINTS, seed: int = 0) -> go.Figure:
    """Prompt vs output length per request (a seeded sample of at most `max_points`)."""
    rows = np.arange(len(workload))
    if len(rows) > max_points:
        rows = np.sort(np.random.default_rng(seed).choice(len(rows), max_points, replace=False))
    figure = go.Figure(go.Scattergl(x=workload.num_prefill_tokens[rows], y=workload.num_decode_tokens[rows],
                                    mode="markers", marker={"size": 4, "opacity": 0.5, "color": "#1b9e77"}))
    sampled = f" ({len(rows)} of {len(workload)} shown)" if len(rows) < len(workload) else ""
    figure.update_layout(title=f"Prompt vs output length{sampled}", xaxis_title="prompt tokens",
                         yaxis_title="output tokens", height=360, margin=WORKLOAD_MARGIN)
    return figure


def report_rows(workload: Workload, fmt: str | None = None) -> list[dict]:
    """The validation report as rows {"item", "value"}: format, size, span, rate, lengths, notes."""
    s = workload_stats(workload)
    rows = [("format", fmt or "synthetic"), ("requests", f"{s['num_requests']:,}"),
            ("span", f"{s['span_s']:.3f} s"),
            ("mean rate", "n/a" if np.isnan(s["mean_qps"]) else f"{s['mean_qps']:.3g} req/s"),
            ("prompt tokens", f"{s['prompt_min']} .. {s['prompt_max']} (mean {s['prompt_mean']:.0f})"),
            ("output tokens", f"{s['output_min']} .. {s['output_max']} (mean {s['output_mean']:.0f})"),
            ("extra columns", ", ".join(s["optional_columns"]) or "none")]
    rows += [("note", note) for note in workload.notes]
    return [{"item": item, "value": value} for item, value in rows]
