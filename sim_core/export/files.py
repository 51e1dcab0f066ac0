"""Write a run's tables and summary to a folder (only when asked: the core does no other IO).

A run's folder describes itself: `manifest.json` lists the files the run wrote with their size
and SHA-256, the scenario's name and seed. Every file is written atomically (see atomic.py).
Rerunning into the folder of an earlier run replaces its files and removes those this run does
not write (e.g. a P/D run's transfers.csv); files the runs did not write are never touched. A
folder that holds other files and no manifest of ours is refused unless `overwrite` is given.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sim_core.export.atomic import TEMP_NAME, OutputError, write_atomic
from sim_core.export.chrome_trace import chrome_trace_text
from sim_core.export.text import shorten

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

REQUEST_COLUMNS = ("request_id", "arrived_at", "num_prefill_tokens", "num_decode_tokens", "replica_id",
                   "status", "scheduled_at", "prefill_completed_at", "completed_at", "num_restarts",
                   "ttft", "tpot", "tbt_max", "e2e", "scheduling_delay", "reject_reason", "n", "num_swaps")
MANIFEST_NAME = "manifest.json"
WRITTEN_BY = "sim_core run"        # marks a manifest as ours
# Every file a run may write: only these names are ever removed from an earlier run's folder.
OUTPUT_NAMES = ("requests.csv", "batches.csv", "batch_stages.csv", "timeseries.csv", "operators.csv",
                "summary.json", "transfers.csv", "cache_ops.csv", "kv_offload.csv", "chrome_trace.json")


def requests_csv(result: SimulationResult) -> str:
    return result.requests.loc[:, list(REQUEST_COLUMNS)].to_csv(index=False)


def batches_csv(result: SimulationResult) -> str:
    frame = result.batches.copy()
    if len(frame):
        frame["request_ids"] = [" ".join(map(str, ids)) for ids in frame["request_ids"]]
        frame["request_tokens"] = [" ".join(map(str, t)) for t in frame["request_tokens"]]
    return frame.to_csv(index=False)


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


def output_files(result: SimulationResult) -> dict[str, Callable[[], str]]:
    """File name -> what writes its text, in writing order: requests.csv, batches.csv,
    batch_stages.csv, timeseries.csv, operators.csv (stage time per cost-model operator),
    summary.json, transfers.csv with P/D pools, cache_ops.csv when the run swapped or copied KV
    blocks (vllm_v0), kv_offload.csv when the run offloaded KV to a CPU tier (vllm_v1),
    chrome_trace.json."""
    files = {"requests.csv": lambda: requests_csv(result), "batches.csv": lambda: batches_csv(result),
             "batch_stages.csv": lambda: result.batch_stages.to_csv(index=False),
             "timeseries.csv": lambda: result.timeseries.to_csv(index=False),
             "operators.csv": lambda: result.operator_times.to_csv(index=False),
             "summary.json": lambda: summary_json(result)}
    if result.pools:   # P/D disaggregation: one row per KV transfer
        files["transfers.csv"] = lambda: result.transfers.to_csv(index=False)
    if len(result.cache_ops):
        files["cache_ops.csv"] = lambda: result.cache_ops.to_csv(index=False)
    if len(result.kv_offload):
        files["kv_offload.csv"] = lambda: result.kv_offload.to_csv(index=False)
    files["chrome_trace.json"] = lambda: chrome_trace_text(result)
    return files


def check_out_dir(out_dir: str | Path, overwrite: bool = False) -> None:
    """Refuse a folder `write_outputs` must not write into (call it before a long run).

    Raises:
        OutputError: `out_dir` is not a folder, or holds files and no manifest of an earlier run
            while `overwrite` is False.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OutputError(f"{shorten(out)}: exists and is not a folder; give a folder for the outputs")
    if overwrite or not out.is_dir() or _previous_manifest(out) is not None:
        return
    others = sorted(name for name in os.listdir(out) if not _is_leftover(name))
    if others:
        raise OutputError(f"{shorten(out)}: folder is not empty ({len(others)} entries, e.g. {shorten(others[0], 60)}) "
                          f"and holds no {MANIFEST_NAME} of an earlier run; choose an empty or new folder, or pass "
                          "--overwrite (files of the same names are replaced, others kept)")


def write_outputs(result: SimulationResult, out_dir: str | Path, overwrite: bool = False) -> list[Path]:
    """Write the run's files (see `output_files`) and `manifest.json` into `out_dir` (created if
    missing); returns the paths written, manifest last.

    Order, so that a run stopped half-way leaves a folder a rerun can clean: a manifest marked
    incomplete that lists the earlier run's files and this run's, each file, removal of the
    earlier run's files this run did not write, the final manifest.

    Raises:
        OutputError: the folder is refused (see `check_out_dir`) or a file cannot be written
            (named; no partial file is left).
    """
    out = Path(out_dir)
    check_out_dir(out, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(out)
    files, previous = output_files(result), _previous_manifest(out) or {}
    header = {"written_by": WRITTEN_BY, "scenario": result.config.name, "seed": result.config.seed}
    pending = dict.fromkeys([*previous, *files])
    write_atomic(out / MANIFEST_NAME, _manifest_text({**header, "complete": False, "files": pending}))
    written = {}
    for name, text in files.items():
        raw = text().encode("utf-8")
        write_atomic(out / name, raw)
        written[name] = {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    for name in previous:
        if name not in written:
            _remove_file(out / name)
    write_atomic(out / MANIFEST_NAME, _manifest_text({**header, "complete": True, "files": written}))
    return [*(out / name for name in written), out / MANIFEST_NAME]


def read_manifest(out_dir: str | Path) -> dict | None:
    """The manifest of the run in `out_dir`, or None when it has none of ours (or cannot be read)."""
    path = Path(out_dir) / MANIFEST_NAME
    try:
        data = json.loads(path.read_bytes()) if path.is_file() else None
    except (OSError, ValueError):
        return None
    ours = isinstance(data, dict) and data.get("written_by") == WRITTEN_BY and isinstance(data.get("files"), dict)
    return data if ours else None


def _previous_manifest(out: Path) -> dict | None:
    """name -> entry of the earlier run's files that a run may write (other names are ignored:
    a hand-edited manifest cannot make us remove anything else)."""
    manifest = read_manifest(out)
    if manifest is None:
        return None
    return {name: entry for name, entry in manifest["files"].items() if name in OUTPUT_NAMES}


def _manifest_text(manifest: dict) -> str:
    return json.dumps(manifest, indent=2, allow_nan=False) + "\n"


def _is_leftover(name: str) -> bool:
    """A temporary file of ours that a killed run left behind."""
    match = TEMP_NAME.match(name)
    return match is not None and match["name"] in (*OUTPUT_NAMES, MANIFEST_NAME)


def _remove_leftovers(out: Path) -> None:
    for name in os.listdir(out):
        if _is_leftover(name):
            _remove_file(out / name)


def _remove_file(path: Path) -> None:
    """Remove a file (or a link, not its target); a folder of that name is left alone."""
    if path.is_symlink() or path.is_file():
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as error:
            raise OutputError(f"cannot remove {shorten(path)} (a file of an earlier run): "
                              f"{error.strerror or error}") from None
