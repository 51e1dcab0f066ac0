"""Vidur's replay format (read) and our canonical format (write).

Replay format: CSV with a header holding at least `arrived_at,num_prefill_tokens,num_decode_tokens`
(seconds since the start, prompt tokens, output tokens); other columns are ignored. The
canonical format adds the optional columns of `Workload` (see formats.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sim_core.workload.hashes import to_text
from sim_core.workload.model import Workload
from sim_core.workload.readers import MAX_TRACE_BYTES, ReadOptions, read_trace

REPLAY_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")


def read_replay_trace(path: str | Path,
                      max_bytes: int = MAX_TRACE_BYTES) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Return (arrived_at, prefill, decode, notes) from a Vidur replay CSV, sorted by arrival.

    Raises:
        TraceError: naming the file, row, column and reason for the first problem found.
    """
    workload = read_trace(path, ReadOptions(format="vidur", max_bytes=max_bytes)).workload
    return workload.arrived_at, workload.num_prefill_tokens, workload.num_decode_tokens, list(workload.notes)


def trace_frame(workload: Workload) -> pd.DataFrame:
    """The workload in the canonical format: the replay columns, then any optional ones."""
    frame = pd.DataFrame({"arrived_at": workload.arrived_at, "num_prefill_tokens": workload.num_prefill_tokens,
                          "num_decode_tokens": workload.num_decode_tokens, **workload.optional_columns()})
    if workload.hash_ids is not None:
        assert workload.hash_offsets is not None, "hash_ids come with their offsets"
        frame["hash_ids"] = to_text(workload.hash_ids, workload.hash_offsets)
    return frame


def write_trace(workload: Workload, path: str | Path) -> None:
    """Write a workload in the canonical format (floats in shortest round-trip form); without
    optional columns this is exactly Vidur's replay format. The file is written whole or not at
    all (see sim_core.export.atomic).

    Raises:
        OutputError: the file cannot be written (named; no partial file is left).
    """
    from sim_core.export.atomic import atomic_open  # here: sim_core.export imports the engine's modules

    frame = trace_frame(workload)
    with atomic_open(path) as file:
        frame.to_csv(file, index=False)


write_replay_trace = write_trace
