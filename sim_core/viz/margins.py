"""Margins wide enough for a chart's tick labels, so plotly's automargin grows none of them.

When a figure's margins already hold its tick labels, axis titles and legend, the browser lays
the chart out once; when automargin must grow one, plotly draws the chart, grows the margin and
draws it all again (see CDF_MARGIN in viz/overview.py). Automargin stays on, so a label longer
than planned still fits, at the cost of that second pass.
"""

from __future__ import annotations

from collections.abc import Iterable

CHAR_PX = 6          # one character of plotly's 12 px tick font, on average (letters ~5.5 px, digits ~6.7 px)
LABEL_PAD_PX = 24    # the tick's standoff from the axis plus slack


def label_margin(labels: Iterable[str], least: int = 40) -> int:
    """A left margin (px) that holds the longest of the category tick `labels`, at least `least`."""
    longest = max((len(str(label)) for label in labels), default=0)
    return max(least, LABEL_PAD_PX + CHAR_PX * longest)
