"""Pure figure builders: results in, plotly figures out (no Streamlit here)."""

from sim_core.viz.gantt import pipeline_gantt

__all__ = ["pipeline_gantt"]
