"""The files a run writes and what renders each: its tables (CSV, or Parquet on request), its
summary and its Chrome trace (JSON, or gzip'd JSON on request). `files.py` writes them into a
folder with a manifest.

Every renderer returns the file's bytes in pieces (bytes or memoryviews), so that a large file
is streamed to disk rather than held whole.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from sim_core.errors import ConfigError
from sim_core.export.batch_lists import BatchLists
from sim_core.export.csv_table import csv_pieces
from sim_core.export.gzip_stream import gzipped
from sim_core.export.record_level import check_writable
from sim_core.export.trace_text import chrome_trace_pieces

if TYPE_CHECKING:
    import pandas as pd

    from sim_core.results.result import SimulationResult

Piece = bytes | memoryview
Render = Callable[[], Iterable[Piece]]

REQUEST_COLUMNS = ("request_id", "arrived_at", "num_prefill_tokens", "num_decode_tokens", "replica_id",
                   "status", "scheduled_at", "prefill_completed_at", "completed_at", "num_restarts",
                   "ttft", "tpot", "tbt_max", "e2e", "scheduling_delay", "reject_reason", "n", "num_swaps")
TABLES = ("requests", "batches", "batch_stages", "timeseries", "operators", "transfers", "cache_ops", "kv_offload")
TABLE_FORMATS = ("csv", "parquet")
TRACE_FORMATS = ("json", "json.gz")
TRACE_NAME = "chrome_trace"
# Every file a run may write: only these names are ever removed from an earlier run's folder.
OUTPUT_NAMES = (*(f"{table}.{kind}" for kind in TABLE_FORMATS for table in TABLES), "summary.json",
                *(f"{TRACE_NAME}.{kind}" for kind in TRACE_FORMATS))


@dataclass(frozen=True)
class OutputFormats:
    """How a run's files are written: `tables` "csv" (as pandas writes them) or "parquet";
    the Chrome trace `trace` "json" or "json.gz" (gzip: Perfetto opens it as it is)."""

    tables: Literal["csv", "parquet"] = "csv"
    trace: Literal["json", "json.gz"] = "json"

    def __post_init__(self) -> None:
        if self.tables not in TABLE_FORMATS:
            raise ConfigError(f"table format {self.tables!r}: choose one of {', '.join(TABLE_FORMATS)}")
        if self.trace not in TRACE_FORMATS:
            raise ConfigError(f"trace format {self.trace!r}: choose one of {', '.join(TRACE_FORMATS)}")


def output_files(result: SimulationResult, formats: OutputFormats | None = None) -> dict[str, Render]:
    """File name -> what renders it, in writing order: requests, batches, batch_stages, timeseries,
    operators (stage time per cost-model operator), summary.json, transfers with P/D pools,
    cache_ops when the run swapped or copied KV blocks (vllm_v0), kv_offload when the run
    offloaded KV to a CPU tier (vllm_v1), the Chrome trace.

    Raises:
        ConfigError: the run was recorded at `engine.record: series` (the app's Overview level:
            its batch table has no members, which the batches table and the trace write).
    """
    check_writable(result.config.engine.record)
    formats = formats or OutputFormats()
    run = _RunTables(result)
    tables = ["requests", "batches", "batch_stages", "timeseries", "operators"]
    optional = [name for name, written in (("transfers", bool(result.pools)), ("cache_ops", len(result.cache_ops)),
                                           ("kv_offload", len(result.kv_offload))) if written]
    render = run.csv if formats.tables == "csv" else run.parquet
    files: dict[str, Render] = {f"{name}.{formats.tables}": _bound(render, name) for name in tables}
    files["summary.json"] = lambda: (summary_json(result).encode("utf-8"),)
    files.update({f"{name}.{formats.tables}": _bound(render, name) for name in optional})
    trace = f"{TRACE_NAME}.{formats.trace}"
    files[trace] = (lambda: gzipped(run.trace())) if formats.trace == "json.gz" else run.trace
    return files


def _bound(render: Callable[[str], Iterable[Piece]], name: str) -> Render:
    return lambda: render(name)


class _RunTables:
    """A run's tables as files; the batches' request lists are built once for every file."""

    def __init__(self, result: SimulationResult) -> None:
        self.result = result

    @cached_property
    def lists(self) -> BatchLists | None:
        return BatchLists(self.result.batches) if len(self.result.batches) else None

    def frame(self, name: str) -> pd.DataFrame:
        result = self.result
        frames = {"requests": lambda: result.requests.loc[:, list(REQUEST_COLUMNS)],
                  "batches": lambda: result.batches, "batch_stages": lambda: result.batch_stages,
                  "timeseries": lambda: result.timeseries, "operators": lambda: result.operator_times,
                  "transfers": lambda: result.transfers, "cache_ops": lambda: result.cache_ops,
                  "kv_offload": lambda: result.kv_offload}
        return frames[name]()

    def csv(self, name: str) -> Iterator[Piece]:
        lists = self.lists if name == "batches" else None
        computed = {} if lists is None else {"request_ids": lambda rows: lists.ids.texts(" ", rows),
                                             "request_tokens": lambda rows: lists.tokens.texts(" ", rows)}
        return csv_pieces(self.frame(name), computed)

    def parquet(self, name: str) -> Iterator[Piece]:
        from sim_core.export.parquet_table import parquet_bytes

        lists = self.lists if name == "batches" else None
        yield parquet_bytes(self.frame(name), {} if lists is None else {
            "request_ids": lists.ids, "request_tokens": lists.tokens})

    def trace(self) -> Iterator[Piece]:
        return chrome_trace_pieces(self.result, self.lists)


def json_ready(value: object) -> object:
    """`value` with every NaN or infinite float (in dicts, lists and tuples) replaced by None,
    so that `json.dumps(..., allow_nan=False)` writes valid JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    return value


def summary_json(result: SimulationResult) -> str:
    return json.dumps(json_ready({"summary": result.summary, "num_blocks": result.num_blocks, "notes": result.notes}),
                      indent=2, allow_nan=False)


def table_text(result: SimulationResult, name: str) -> str:
    """One table's CSV text (e.g. "requests", "batches").

    Raises:
        ConfigError: the batches table of a run recorded at `engine.record: series`
            (record_level.py).
    """
    if name == "batches":
        check_writable(result.config.engine.record)
    return b"".join(_RunTables(result).csv(name)).decode("utf-8")
