"""Subplot grids made once per shape (sim_core/viz/grid.py): the same layout as make_subplots."""

import pytest
from plotly.subplots import make_subplots

from sim_core.viz.grid import axes, axis_names, grid_figure


@pytest.mark.parametrize(("ours", "theirs"), [
    (lambda: grid_figure(1, 4, shared_yaxes=True, horizontal_spacing=0.04),
     lambda: make_subplots(rows=1, cols=4, shared_yaxes=True, horizontal_spacing=0.04)),
    (lambda: grid_figure(secondary_y=True), lambda: make_subplots(specs=[[{"secondary_y": True}]])),
    (lambda: grid_figure(2, 1, row_heights=(0.72, 0.28), vertical_spacing=0.08),
     lambda: make_subplots(rows=2, cols=1, row_heights=[0.72, 0.28], vertical_spacing=0.08)),
])
def test_a_grid_figure_is_the_figure_make_subplots_makes(ours, theirs):
    assert ours().to_dict() == theirs().to_dict()


def test_four_panels_share_their_y_axis_and_split_the_width_by_hand():
    """1 x 4 with 0.04 between panels: each is (1 - 3 x 0.04) / 4 = 0.22 wide."""
    layout = grid_figure(1, 4, shared_yaxes=True, horizontal_spacing=0.04).layout
    starts = [layout[axis_names(n)[0]].domain[0] for n in range(1, 5)]
    assert starts == pytest.approx([0.0, 0.26, 0.52, 0.78])
    assert [layout[axis_names(n)[1]].matches for n in range(1, 5)] == [None, "y", "y", "y"]


def test_each_figure_starts_from_its_own_copy_of_the_grid():
    first = grid_figure(2, 1, row_heights=(0.72, 0.28), vertical_spacing=0.08)
    first.update_layout(xaxis2={"title": {"text": "time (s)"}})
    assert grid_figure(2, 1, row_heights=(0.72, 0.28), vertical_spacing=0.08).layout.xaxis2.title.text is None


def test_a_trace_names_the_axes_of_its_subplot():
    assert axes(1) == {"xaxis": "x", "yaxis": "y"}
    assert axes(3) == {"xaxis": "x3", "yaxis": "y3"}
    assert axis_names(1) == ("xaxis", "yaxis") and axis_names(2) == ("xaxis2", "yaxis2")
