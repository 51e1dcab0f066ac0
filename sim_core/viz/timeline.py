"""The request state timeline: one row per (sampled) request, coloured lifecycle segments."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim_core.viz.margins import label_margin
from sim_core.viz.segments import KIND_COLORS, request_segments

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

SORTS = {
    "arrival": ("request_id", True),
    "slowest TTFT": ("ttft", False),
    "slowest end-to-end": ("e2e", False),
    "most restarts": ("num_restarts", False),
    "worst TBT": ("tbt_max", False),
    "session": ("session_id", True),        # turns of one conversation together (needs session columns)
}


def pick_requests(requests: pd.DataFrame, sort: str = "arrival", replica: int | None = None,
                  restarted_only: bool = False, limit: int = 200) -> pd.DataFrame:
    """The rows to draw: filtered by replica and restarts, ordered by `sort` (a key of SORTS),
    at most `limit`. Sorting by a latency puts requests without one (rejected) last."""
    rows = requests
    if replica is not None:
        rows = rows[rows["replica_id"] == replica]
    if restarted_only:
        rows = rows[rows["num_restarts"] > 0]
    column, ascending = SORTS[sort]
    rows = rows.sort_values([column, "request_id"], ascending=[ascending, True], na_position="last", kind="stable")
    return rows.head(limit)


def request_window(requests: pd.DataFrame, request_id: int, end: float, pad: float = 0.1) -> tuple[float, float] | None:
    """The time window that shows request `request_id`: its arrival to its completion (the run's
    `end` if it never completed), widened by `pad` of its length on each side and clipped to
    [0, end]; None when there is no such request."""
    row = requests[requests["request_id"] == request_id]
    if row.empty or not np.isfinite(row["arrived_at"].iloc[0]):
        return None
    start = float(row["arrived_at"].iloc[0])
    done = row["completed_at"].iloc[0]
    stop = float(done) if pd.notna(done) and done >= start else end
    margin = max(stop - start, 1e-3) * pad
    return max(0.0, start - margin), min(end, stop + margin)


def timeline_figure(result: SimulationResult, rows: pd.DataFrame, selected: int | None = None) -> go.Figure:
    """Horizontal lifecycle bars for `rows` (top to bottom in their order) on a numeric time axis;
    one trace per segment kind, finish markers, hover with the request's metrics. Rows with
    `session_id` and `turn` columns are labelled "#12 s3 t1" (request 12, session 3, turn 1)."""
    ids = rows["request_id"].to_numpy()
    segments = request_segments(result, ids)
    labels = {int(r): f"#{int(r)}" for r in ids}
    if "session_id" in rows.columns:
        labels = {int(r): f"#{int(r)} s{int(s)} t{int(t)}"
                  for r, s, t in zip(ids, rows["session_id"].to_numpy(), rows["turn"].to_numpy())}
    info = rows.set_index("request_id")
    figure = go.Figure()
    for kind, color in KIND_COLORS.items():
        part = segments[segments["kind"] == kind]
        if len(part):
            figure.add_trace(_bars(part, kind, color, labels, info))
    done = rows[rows["completed_at"].notna()]
    figure.add_trace(go.Scatter(x=done["completed_at"], y=[labels[int(r)] for r in done["request_id"]],
                                mode="markers", marker={"symbol": "line-ns-open", "size": 10, "color": "#222"},
                                name="finished", hovertemplate="finished at %{x:.3f} s<extra>%{y}</extra>"))
    order = [labels[int(r)] for r in ids]
    figure.update_layout(
        barmode="overlay", xaxis_title="time (s)", height=160 + 16 * max(len(ids), 1), bargap=0.2,
        yaxis={"categoryorder": "array", "categoryarray": order[::-1], "type": "category",
               "range": [-0.6, len(order) - 0.4]},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"},
        margin={"l": label_margin(order), "r": 20, "t": 76, "b": 68},   # the legend above
        clickmode="event+select")
    if selected is not None and selected in labels:
        figure.add_hrect(y0=order[::-1].index(labels[selected]) - 0.5, y1=order[::-1].index(labels[selected]) + 0.5,
                         fillcolor="#ffd400", opacity=0.35, line_width=0, layer="below")
    return figure


def _bars(part: pd.DataFrame, kind: str, color: str, labels: dict, info: pd.DataFrame) -> go.Bar:
    metrics = info.loc[part["request"].to_numpy()]
    custom = np.stack([part["request"].to_numpy(), metrics["replica_id"].to_numpy(),
                       metrics["num_prefill_tokens"].to_numpy(), metrics["num_decode_tokens"].to_numpy(),
                       _ms(metrics["ttft"]), _ms(metrics["e2e"]), metrics["num_restarts"].to_numpy()], axis=1)
    return go.Bar(
        name=kind, orientation="h", y=[labels[int(r)] for r in part["request"]], base=part["start"],
        x=part["end"] - part["start"], marker={"color": color, "line": {"width": 0}}, customdata=custom,
        hovertemplate=(f"<b>{kind}</b> %{{base:.3f}} s + %{{x:.3f}} s<br>request %{{customdata[0]}} on replica "
                       "%{customdata[1]}: %{customdata[2]} prompt + %{customdata[3]} output tokens<br>"
                       "TTFT %{customdata[4]:.0f} ms, e2e %{customdata[5]:.0f} ms, restarts %{customdata[6]}"
                       "<extra></extra>"))


def _ms(values: pd.Series) -> np.ndarray:
    return values.to_numpy(dtype=np.float64, na_value=np.nan) * 1e3


def selected_from_event(event: object) -> int | None:
    """The request id of the first clicked/selected point of a Streamlit plotly selection event."""
    points = (event or {}).get("selection", {}).get("points", []) if isinstance(event, dict) else \
        getattr(getattr(event, "selection", None), "points", []) or []
    for point in points:
        label = point.get("y") if isinstance(point, dict) else None
        if isinstance(label, str) and label.startswith("#") and label[1:].isdigit():
            return int(label[1:])
    return None
