"""The trace formats we read, and how to tell them apart by their columns.

| format          | file                  | arrival               | prompt / output tokens              |
|-----------------|-----------------------|-----------------------|-------------------------------------|
| canonical       | CSV (ours)            | arrived_at (s)        | num_prefill_tokens, num_decode_tokens |
| vidur           | CSV (Vidur replay)    | arrived_at (s)        | num_prefill_tokens, num_decode_tokens |
| vidur_lengths   | CSV (Vidur lengths)   | generated             | num_prefill_tokens, num_decode_tokens |
| azure           | CSV (Azure 2023/2024) | TIMESTAMP (date-time) | ContextTokens, GeneratedTokens      |
| burstgpt        | CSV (BurstGPT)        | Timestamp (s)         | Request tokens, Response tokens     |
| mooncake        | JSON lines            | timestamp (ms)        | input_length, output_length (+ hash_ids) |

The canonical format is Vidur's replay format plus optional columns (priority, session_id,
turn, prefix_group, prefix_len, n (parallel samples), and hash_ids as space-separated integers); `vidur` reads only
the three required columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim_core.errors import TraceError
from sim_core.workload.model import OPTIONAL_COLUMNS


@dataclass(frozen=True)
class CsvFormat:
    """Where a CSV format keeps arrival time and token counts."""

    name: str
    time: str | None            # arrival-time column; None: lengths only (arrivals are generated)
    time_unit: str              # "s", "ms" or "datetime"
    prompt: str
    output: str
    optional: tuple[str, ...] = ()          # canonical optional columns read when present
    text: tuple[str, ...] = ()              # text columns used to filter rows

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(c for c in (self.time, self.prompt, self.output) if c) + self.text


CSV_FORMATS = {
    "canonical": CsvFormat("canonical", "arrived_at", "s", "num_prefill_tokens", "num_decode_tokens",
                           optional=(*OPTIONAL_COLUMNS, "hash_ids")),
    "vidur": CsvFormat("vidur", "arrived_at", "s", "num_prefill_tokens", "num_decode_tokens"),
    "vidur_lengths": CsvFormat("vidur_lengths", None, "s", "num_prefill_tokens", "num_decode_tokens"),
    "azure": CsvFormat("azure", "TIMESTAMP", "datetime", "ContextTokens", "GeneratedTokens"),
    "burstgpt": CsvFormat("burstgpt", "Timestamp", "s", "Request tokens", "Response tokens",
                          text=("Model", "Log Type")),
}
MOONCAKE_KEYS = ("timestamp", "input_length", "output_length")
FORMAT_NAMES = ("auto", *CSV_FORMATS, "mooncake")
DETECTION_ORDER = ("canonical", "vidur_lengths", "azure", "burstgpt")


def is_json_lines(path: Path) -> bool:
    """True when the first non-blank character of the file is '{' (JSON lines)."""
    with path.open("rb") as handle:
        head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{")


def detect_csv_format(columns: list[str], name: str) -> str:
    """The first format (in DETECTION_ORDER) whose required columns are all in the header.

    Raises:
        TraceError: no format matches; lists what was found and what each format expects.
    """
    for candidate in DETECTION_ORDER:
        if all(c in columns for c in CSV_FORMATS[candidate].required):
            return candidate
    expected = "; ".join(f"{n}: {', '.join(CSV_FORMATS[n].required)}" for n in DETECTION_ORDER)
    raise TraceError(name, f"cannot tell the trace format from its columns; found: {', '.join(columns)}; "
                     f"expected the columns of one of: {expected}; or Mooncake JSON lines "
                     f"({', '.join(MOONCAKE_KEYS)}){case_hint(columns)}")


def check_columns(spec: CsvFormat, columns: list[str], name: str) -> None:
    """Raise a TraceError naming missing columns, what exists and what was expected."""
    missing = [c for c in spec.required if c not in columns]
    if missing:
        raise TraceError(name, f"missing column(s) {', '.join(missing)}; found: {', '.join(columns)}; "
                         f"expected: {', '.join(spec.required)}{case_hint(columns, missing)}")


def case_hint(columns: list[str], wanted: list[str] | None = None) -> str:
    """' (names are case-sensitive: ...)' when a column differs from an expected one only in case."""
    wanted = wanted or [c for spec in CSV_FORMATS.values() for c in spec.required]
    by_lower = {c.lower(): c for c in wanted}
    pairs = [f"'{c}' should be '{by_lower[c.lower()]}'" for c in columns
             if c.lower() in by_lower and c != by_lower[c.lower()]]
    return f" (names are case-sensitive: {', '.join(dict.fromkeys(pairs))})" if pairs else ""
