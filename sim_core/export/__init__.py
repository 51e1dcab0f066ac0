"""Exporters: Chrome trace, CSV tables, summary JSON, scenario YAML."""

from sim_core.export.chrome_trace import chrome_trace, write_chrome_trace
from sim_core.export.files import batches_csv, requests_csv, summary_json, write_outputs

__all__ = ["batches_csv", "chrome_trace", "requests_csv", "summary_json", "write_chrome_trace", "write_outputs"]
