"""Write a run's tables and summary to a folder (only when asked: the core does no other IO)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from sim_core.export.chrome_trace import write_chrome_trace

REQUEST_COLUMNS = ("request_id", "arrived_at", "num_prefill_tokens", "num_decode_tokens", "replica_id",
                   "status", "scheduled_at", "prefill_completed_at", "completed_at", "num_restarts",
                   "ttft", "tpot", "tbt_max", "e2e", "scheduling_delay", "reject_reason", "n", "num_swaps")


def requests_csv(result) -> str:
    return result.requests.loc[:, list(REQUEST_COLUMNS)].to_csv(index=False)


def batches_csv(result) -> str:
    frame = result.batches.copy()
    if len(frame):
        frame["request_ids"] = [" ".join(map(str, ids)) for ids in frame["request_ids"]]
        frame["request_tokens"] = [" ".join(map(str, t)) for t in frame["request_tokens"]]
    return frame.to_csv(index=False)


def summary_json(result) -> str:
    clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in result.summary.items()}
    return json.dumps({"summary": clean, "num_blocks": result.num_blocks, "notes": result.notes}, indent=2)


def write_outputs(result, out_dir: str | Path) -> list[Path]:
    """Write requests.csv, batches.csv, batch_stages.csv, timeseries.csv, operators.csv (stage
    time per cost-model operator), summary.json, chrome_trace.json, transfers.csv with P/D pools
    and cache_ops.csv when the run swapped or copied KV blocks (vllm_v0) into `out_dir` (created
    if missing); returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"requests.csv": requests_csv(result), "batches.csv": batches_csv(result),
             "batch_stages.csv": result.batch_stages.to_csv(index=False),
             "timeseries.csv": result.timeseries.to_csv(index=False),
             "operators.csv": result.operator_times.to_csv(index=False), "summary.json": summary_json(result)}
    if result.pools:   # P/D disaggregation: one row per KV transfer
        files["transfers.csv"] = result.transfers.to_csv(index=False)
    if len(result.cache_ops):
        files["cache_ops.csv"] = result.cache_ops.to_csv(index=False)
    for name, text in files.items():
        (out / name).write_text(text)
    write_chrome_trace(result, out / "chrome_trace.json")
    return [out / name for name in (*files, "chrome_trace.json")]
