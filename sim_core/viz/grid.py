"""Subplot grids without `make_subplots`' cost on every figure.

`plotly.subplots.make_subplots` lays out its grid and validates every axis anew each call (15-25
ms, as much as the rest of an Overview chart). The grid's layout depends only on the grid's
shape, so it is made once per shape here and each figure starts from a copy (1-2 ms). A trace
then names its axes (`axes(n)`: "x2" / "y2") instead of passing row and col.
"""

from __future__ import annotations

import copy
from functools import cache

import plotly.graph_objects as go
from plotly.subplots import make_subplots


@cache
def _grid_layout(rows: int, cols: int, shared_yaxes: bool, horizontal_spacing: float | None,
                 vertical_spacing: float | None, row_heights: tuple[float, ...] | None,
                 secondary_y: bool) -> dict:
    specs = [[{"secondary_y": True}] * cols for _ in range(rows)] if secondary_y else None
    grid = make_subplots(rows=rows, cols=cols, shared_yaxes=shared_yaxes, horizontal_spacing=horizontal_spacing,
                         vertical_spacing=vertical_spacing, row_heights=list(row_heights) if row_heights else None,
                         specs=specs)
    layout = grid.layout.to_plotly_json()
    layout.pop("template", None)        # the figure gets the default template as any other does
    return layout


def grid_figure(rows: int = 1, cols: int = 1, *, shared_yaxes: bool = False, horizontal_spacing: float | None = None,
                vertical_spacing: float | None = None, row_heights: tuple[float, ...] | None = None,
                secondary_y: bool = False) -> go.Figure:
    """An empty figure laid out as `make_subplots` with these arguments lays it out (with
    `secondary_y`, every cell has a secondary y axis: cell 1's is "y2")."""
    return go.Figure(layout=copy.deepcopy(_grid_layout(rows, cols, shared_yaxes, horizontal_spacing, vertical_spacing,
                                                       row_heights, secondary_y)))


def axes(number: int) -> dict[str, str]:
    """The trace arguments that put a trace on subplot `number` (1, 2, ...: row by row)."""
    suffix = "" if number == 1 else str(number)
    return {"xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}


def axis_names(number: int) -> tuple[str, str]:
    """The layout keys of subplot `number`'s axes ("xaxis", "yaxis"; "xaxis2", "yaxis2"; ...)."""
    suffix = "" if number == 1 else str(number)
    return f"xaxis{suffix}", f"yaxis{suffix}"
