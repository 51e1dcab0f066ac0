"""Workloads: read a trace (many formats) or generate requests; always validated, in arrival order."""

from __future__ import annotations

from sim_core.workload.build import (
           build_workload,
           build_workload_and_format,
           clip,
           read_options,
)
from sim_core.workload.model import OPTIONAL_COLUMNS, Workload
from sim_core.workload.readers import ReadOptions, TraceRead, read_trace
from sim_core.workload.trace import (
           REPLAY_COLUMNS,
           read_replay_trace,
           trace_frame,
           write_replay_trace,
           write_trace,
)

__all__ = ["OPTIONAL_COLUMNS", "REPLAY_COLUMNS", "ReadOptions", "TraceRead", "Workload", "build_workload",
           "build_workload_and_format", "clip", "read_options", "read_replay_trace", "read_trace", "trace_frame",
           "write_replay_trace", "write_trace"]
