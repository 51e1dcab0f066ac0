"""Pure figure builders: results in, plotly figures out (no Streamlit here)."""

from sim_core.viz.gantt import pipeline_gantt
from sim_core.viz.workload import (
           arrival_rate_figure,
           length_histogram_figure,
           length_scatter_figure,
           report_rows,
)

__all__ = ["arrival_rate_figure", "length_histogram_figure", "length_scatter_figure", "pipeline_gantt",
           "report_rows"]
