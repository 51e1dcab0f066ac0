"""Exporters: Chrome trace, CSV or Parquet tables, summary JSON, scenario YAML."""

from sim_core.export.atomic import OutputError, atomic_open, write_atomic
from sim_core.export.chrome_trace import chrome_trace, trace_file_name
from sim_core.export.files import (
           batches_csv,
           check_out_dir,
           read_manifest,
           requests_csv,
           summary_json,
           write_outputs,
)
from sim_core.export.run_files import OutputFormats
from sim_core.export.trace_text import chrome_trace_bytes, write_chrome_trace

__all__ = ["OutputError", "OutputFormats", "atomic_open", "batches_csv", "chrome_trace", "chrome_trace_bytes",
           "check_out_dir", "read_manifest", "requests_csv", "summary_json", "trace_file_name", "write_atomic",
           "write_chrome_trace", "write_outputs"]
