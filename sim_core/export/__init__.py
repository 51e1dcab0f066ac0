"""Exporters: Chrome trace, CSV tables, summary JSON, scenario YAML."""

from sim_core.export.atomic import OutputError, atomic_open, write_atomic
from sim_core.export.chrome_trace import chrome_trace, trace_file_name, write_chrome_trace
from sim_core.export.files import (
           batches_csv,
           check_out_dir,
           read_manifest,
           requests_csv,
           summary_json,
           write_outputs,
)

__all__ = ["OutputError", "atomic_open", "batches_csv", "chrome_trace", "check_out_dir", "read_manifest",
           "requests_csv", "summary_json", "trace_file_name", "write_atomic", "write_chrome_trace", "write_outputs"]
