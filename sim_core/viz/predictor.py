"""Figures of the cost models: per-operator time against tokens (prefill) and against batch and
context (decode), predictions against measured profile rows, and per-operator error bars."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim_core.predictor.shape import BatchShape

if TYPE_CHECKING:
    from sim_core.predictor.grid import GridPredictor
    from sim_core.predictor.linear import LinearPredictor

DASHES = ("solid", "dash", "dot", "dashdot")


def prefill_frame(predictors: Mapping[str, LinearPredictor | GridPredictor], tokens: Iterable[int],
                  stage: int = 0) -> pd.DataFrame:
    """Long table (predictor, tokens, operator, ms) for one-request prefills of each size."""
    rows = []
    for label, predictor in predictors.items():
        for t in tokens:
            for op, seconds in predictor.breakdown(BatchShape(1, int(t), ((int(t), 0),)), stage).items():
                rows.append({"predictor": label, "tokens": int(t), "operator": op, "ms": seconds * 1e3})
    return pd.DataFrame(rows)


def decode_frame(predictors: Mapping[str, LinearPredictor | GridPredictor], batch_sizes: Iterable[int],
                 contexts: Iterable[int], stage: int = 0) -> pd.DataFrame:
    """Long table (predictor, batch, context, ms) of decode-only stage times: `batch` requests
    each holding `context` KV tokens."""
    rows = [{"predictor": label, "batch": int(b), "context": int(c),
             "ms": p.stage_time(BatchShape(int(b), int(b), (), int(b), int(b) * int(c)), stage) * 1e3}
            for label, p in predictors.items() for c in contexts for b in batch_sizes]
    return pd.DataFrame(rows)


def operator_lines(frame: pd.DataFrame, x: str = "tokens", top: int = 8) -> go.Figure:
    """One line per (predictor, operator) for the `top` operators with the most time; line style
    tells the predictors apart."""
    totals = frame.groupby("operator")["ms"].sum().sort_values(ascending=False)
    figure = go.Figure()
    for i, label in enumerate(frame["predictor"].unique()):
        for op in totals.index[:top]:
            part = frame[(frame["predictor"] == label) & (frame["operator"] == op)]
            figure.add_trace(go.Scatter(x=part[x], y=part["ms"], mode="lines", name=f"{op} ({label})",
                                        line={"dash": DASHES[i % len(DASHES)]}))
    figure.update_layout(xaxis_title=x, yaxis_title="ms per stage", legend_title_text="operator")
    return figure


def decode_lines(frame: pd.DataFrame) -> go.Figure:
    """Decode stage time against batch size, one line per (predictor, context)."""
    figure = go.Figure()
    for i, label in enumerate(frame["predictor"].unique()):
        for context in sorted(frame["context"].unique()):
            part = frame[(frame["predictor"] == label) & (frame["context"] == context)]
            figure.add_trace(go.Scatter(x=part["batch"], y=part["ms"], mode="lines+markers",
                                        name=f"{context} ctx ({label})", line={"dash": DASHES[i % len(DASHES)]}))
    figure.update_layout(xaxis_title="decode batch size", yaxis_title="ms per stage", legend_title_text="context")
    return figure


def measured_vs_predicted(x: np.ndarray, measured: np.ndarray, predicted: dict[str, np.ndarray],
                          operator: str, x_title: str = "tokens") -> go.Figure:
    """Measured profile rows as points and each predictor's price of the same rows as a line."""
    order = np.argsort(x)
    figure = go.Figure(go.Scatter(x=x[order], y=measured[order] * 1e3, mode="markers", name="measured"))
    for i, (label, values) in enumerate(predicted.items()):
        figure.add_trace(go.Scatter(x=x[order], y=np.asarray(values)[order] * 1e3, mode="lines", name=label,
                                    line={"dash": DASHES[i % len(DASHES)]}))
    figure.update_layout(title=operator, xaxis_title=x_title, yaxis_title="ms per kernel")
    return figure


def error_bars(errors: dict[str, dict[str, float]]) -> go.Figure:
    """Grouped bars: operator -> error (%) for each model (e.g. learned MAPE, roofline median)."""
    figure = go.Figure([go.Bar(name=label, x=list(values), y=list(values.values()))
                        for label, values in errors.items()])
    figure.update_layout(barmode="group", yaxis_title="error %", xaxis_title="operator")
    return figure
