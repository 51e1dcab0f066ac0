"""Readers of profiling CSVs in Vidur's format, validated row by row.

Vidur writes one row per measured shape, with `time_stats.<operator>.{min,max,mean,median,std}`
in milliseconds and the shape in plain columns:

| file           | shape columns used here                                              |
|----------------|----------------------------------------------------------------------|
| mlp.csv        | num_tokens, num_tensor_parallel_workers                              |
| attention.csv  | batch_size, prefill_chunk_size, kv_cache_size, is_prefill,           |
|                | num_tensor_parallel_workers                                          |
| all_reduce.csv | size (bytes), num_workers, devices_per_node                          |
| send_recv.csv  | size (bytes), num_workers, devices_per_node                          |

Each reader returns one tidy frame per operator: the features, `tp` and `time_s` (the median
in seconds). Empty time cells (operators not measured for that row) are skipped; anything else
that is not a valid number is a ProfileError naming file, row and column.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from sim_core.errors import TraceError

MAX_PROFILE_BYTES = 200_000_000
STAT = "median"
MLP_OPERATORS = ("emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
                 "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")
ATTENTION_OPERATORS = ("attn_prefill", "attn_decode", "attn_kv_cache_save")
# Features of each operator's model (what its time is a function of).
FEATURES = {**{op: ("num_tokens",) for op in MLP_OPERATORS},
            "attn_prefill": ("kv_cache_size", "prefill_chunk_size"),
            "attn_decode": ("batch_size", "kv_cache_size"),
            "attn_kv_cache_save": ("num_tokens",),
            "all_reduce": ("size",), "send_recv": ("size",)}


class ProfileError(TraceError):
    """A profiling CSV cannot be used; names file, row (1-based data row), column and reason."""


def _read(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise ProfileError(str(path), "file not found")
    if path.stat().st_size > MAX_PROFILE_BYTES:
        raise ProfileError(str(path), f"larger than {MAX_PROFILE_BYTES} bytes; not a profile")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise ProfileError(str(path), f"not a readable CSV ({' '.join(str(exc).split())})") from None
    if frame.empty:
        raise ProfileError(str(path), "no data rows")
    return frame


def _require(frame: pd.DataFrame, path: Path, columns: Iterable[str]) -> None:
    for column in columns:
        if column not in frame.columns:
            raise ProfileError(str(path), f"missing column '{column}' (Vidur's {path.name} has it)")


def _numbers(frame: pd.DataFrame, path: Path, column: str, allow_empty: bool = False,
             minimum: float = 0.0) -> np.ndarray:
    """A column as floats; the first bad cell is an error naming its row."""
    text = frame[column].str.strip()
    values = pd.to_numeric(text.where(text != ""), errors="coerce").to_numpy(dtype=np.float64)
    bad = (np.isnan(values) & ((text != "").to_numpy() | (not allow_empty))) | (values < minimum)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        cell = text.iloc[row]
        reason = "empty" if cell == "" else (f"'{cell}' is not a number" if np.isnan(values[row])
                                             else f"{cell} is below {minimum:g}")
        raise ProfileError(str(path), reason, row=row + 1, column=column)
    return values


def _booleans(frame: pd.DataFrame, path: Path, column: str) -> np.ndarray:
    text = frame[column].str.strip().str.lower()
    bad = ~text.isin(["true", "false", "1", "0"])
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ProfileError(str(path), f"'{frame[column].iloc[row]}' is not True/False", row=row + 1, column=column)
    return text.isin(["true", "1"]).to_numpy()


def _times(frame: pd.DataFrame, path: Path, operator: str) -> np.ndarray:
    column = f"time_stats.{operator}.{STAT}"
    return _numbers(frame, path, column, allow_empty=True) * 1e-3  # ms -> s


def _tidy(features: dict, tp: int | np.ndarray, times: np.ndarray) -> pd.DataFrame:
    frame = pd.DataFrame({**features, "tp": tp, "time_s": times})
    return frame[frame["time_s"].notna()].reset_index(drop=True)


def read_mlp(path: str | Path) -> dict[str, pd.DataFrame]:
    """Per-operator frames (num_tokens, tp, time_s) of a Vidur `mlp.csv`."""
    path = Path(path)
    frame = _read(path)
    _require(frame, path, ("num_tokens", "num_tensor_parallel_workers"))
    tokens = _numbers(frame, path, "num_tokens", minimum=1)
    tp = _numbers(frame, path, "num_tensor_parallel_workers", minimum=1)
    present = [op for op in MLP_OPERATORS if f"time_stats.{op}.{STAT}" in frame.columns]
    if not present:
        raise ProfileError(str(path), f"no 'time_stats.<operator>.{STAT}' column of any of {', '.join(MLP_OPERATORS)}")
    return {op: _tidy({"num_tokens": tokens}, tp, _times(frame, path, op)) for op in present}


def read_attention(path: str | Path) -> dict[str, pd.DataFrame]:
    """Per-operator frames of a Vidur `attention.csv`: attn_prefill (kv_cache_size,
    prefill_chunk_size), attn_decode (batch_size, kv_cache_size), attn_kv_cache_save (num_tokens)."""
    path = Path(path)
    frame = _read(path)
    _require(frame, path, ("batch_size", "prefill_chunk_size", "kv_cache_size", "is_prefill",
                           "num_tensor_parallel_workers"))
    batch = _numbers(frame, path, "batch_size", minimum=1)
    chunk = _numbers(frame, path, "prefill_chunk_size")
    kv = _numbers(frame, path, "kv_cache_size")
    prefill = _booleans(frame, path, "is_prefill")
    tp = _numbers(frame, path, "num_tensor_parallel_workers", minimum=1)
    out = {}
    for op in ATTENTION_OPERATORS:
        if f"time_stats.{op}.{STAT}" not in frame.columns:
            continue
        times = _times(frame, path, op)
        if op == "attn_prefill":
            out[op] = _tidy({"kv_cache_size": kv[prefill], "prefill_chunk_size": chunk[prefill]}, tp[prefill],
                            times[prefill])
        elif op == "attn_decode":
            out[op] = _tidy({"batch_size": batch[~prefill], "kv_cache_size": kv[~prefill]}, tp[~prefill],
                            times[~prefill])
        else:
            out[op] = _tidy({"num_tokens": np.where(prefill, chunk * batch, batch)}, tp, times)
    return out


def read_collective(path: str | Path, operator: str) -> pd.DataFrame:
    """A Vidur `all_reduce.csv` or `send_recv.csv` as (size, tp, time_s): `tp` is the number of
    workers; only rows with every worker on one node are kept (our links are intra-node)."""
    path = Path(path)
    frame = _read(path)
    _require(frame, path, ("size", "num_workers", f"time_stats.{operator}.{STAT}"))
    size = _numbers(frame, path, "size", minimum=1)
    workers = _numbers(frame, path, "num_workers", minimum=1)
    times = _times(frame, path, operator)
    if "devices_per_node" in frame.columns:
        local = _numbers(frame, path, "devices_per_node", minimum=1) >= workers
        size, workers, times = size[local], workers[local], times[local]
    return _tidy({"size": size}, workers, times)
