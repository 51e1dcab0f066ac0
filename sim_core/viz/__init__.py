"""Pure figure builders: results in, plotly figures out (no Streamlit here)."""

from sim_core.viz.gantt import pipeline_gantt
from sim_core.viz.predictor import (
                                    decode_frame,
                                    decode_lines,
                                    error_bars,
                                    measured_vs_predicted,
                                    operator_lines,
                                    prefill_frame,
)
from sim_core.viz.workload import arrival_rate_figure, length_histogram_figure, length_scatter_figure, report_rows

__all__ = ["arrival_rate_figure", "decode_frame", "decode_lines", "error_bars", "length_histogram_figure",
           "length_scatter_figure", "measured_vs_predicted", "operator_lines", "pipeline_gantt",
           "prefill_frame", "report_rows"]
