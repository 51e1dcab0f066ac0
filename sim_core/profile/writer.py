"""Write measurements as Vidur-format CSVs (times in milliseconds, five statistics each)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from sim_core.catalog import ModelSpec

STATS = ("min", "max", "mean", "median", "std")


def time_columns(samples_ms: dict[str, list[float]]) -> dict[str, float]:
    """`time_stats.<op>.<stat>` columns from repeated measurements (ms) of each operator."""
    row = {}
    for op, samples in samples_ms.items():
        values = np.asarray(samples, dtype=np.float64)
        stats = (values.min(), values.max(), values.mean(), np.median(values), values.std())
        row.update({f"time_stats.{op}.{name}": float(v) for name, v in zip(STATS, stats)})
    return row


def mlp_row(model: ModelSpec, tp: int, num_tokens: int, samples_ms: dict[str, list[float]]) -> dict:
    """One row of `mlp.csv` (shape columns as Vidur names them)."""
    return {**time_columns(samples_ms), "n_head": model.num_q_heads, "n_kv_head": model.num_kv_heads,
            "n_embd": model.embedding_dim, "n_expanded_embd": model.mlp_hidden_dim, "vocab_size": model.vocab_size,
            "use_gated_mlp": model.use_gated_mlp, "num_tokens": num_tokens, "num_tensor_parallel_workers": tp}


def attention_row(model: ModelSpec, tp: int, batch_size: int, chunk: int, kv_cache_size: int,
                  is_prefill: bool, block_size: int, max_model_len: int, samples_ms: dict[str, list[float]]) -> dict:
    """One row of `attention.csv`."""
    return {**time_columns(samples_ms), "n_embd": model.embedding_dim, "n_q_head": model.num_q_heads,
            "n_kv_head": model.num_kv_heads, "block_size": block_size, "num_tensor_parallel_workers": tp,
            "max_model_len": max_model_len, "batch_size": batch_size, "prefill_chunk_size": chunk,
            "kv_cache_size": kv_cache_size, "is_prefill": is_prefill, "attention_backend": "torch_sdpa"}


def write_rows(path: str | Path, rows: list[dict]) -> Path:
    """Write rows as a CSV, creating folders; columns are every key in first-seen order, and a
    row without an operator's times leaves them empty (not measured). Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


def profile_folder(out: str | Path, device: str, model: str) -> Path:
    """Where the learned predictor looks for this device's and model's compute profile."""
    return Path(out) / "compute" / device / "sim_core" / model
