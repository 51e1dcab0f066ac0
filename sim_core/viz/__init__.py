"""Pure figure builders: results in, plotly figures out (no Streamlit here)."""

from sim_core.viz.gantt import pipeline_gantt
from sim_core.viz.predictor import (decode_frame, decode_lines, error_bars, measured_vs_predicted, memory_bars,
                                    operator_lines, prefill_frame)

__all__ = ["decode_frame", "decode_lines", "error_bars", "measured_vs_predicted", "memory_bars", "operator_lines",
           "pipeline_gantt", "prefill_frame"]
