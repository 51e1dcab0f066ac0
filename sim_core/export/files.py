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
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from sim_core.export.atomic import TEMP_NAME, OutputError, atomic_open, write_atomic
from sim_core.export.run_files import (
    OUTPUT_NAMES,
    REQUEST_COLUMNS,
    OutputFormats,
    Piece,
    json_ready,
    output_files,
    summary_json,
    table_text,
)
from sim_core.export.text import shorten

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

__all__ = ["OUTPUT_NAMES", "REQUEST_COLUMNS", "OutputFormats", "batches_csv", "check_out_dir", "json_ready",
           "output_files", "read_manifest", "requests_csv", "summary_json", "write_outputs"]
MANIFEST_NAME = "manifest.json"
WRITTEN_BY = "sim_core run"        # marks a manifest as ours


def requests_csv(result: SimulationResult) -> str:
    return table_text(result, "requests")


def batches_csv(result: SimulationResult) -> str:
    """The batches table as CSV, each batch's request ids and tokens joined by spaces."""
    return table_text(result, "batches")


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


def write_outputs(result: SimulationResult, out_dir: str | Path, overwrite: bool = False,
                  formats: OutputFormats | None = None) -> list[Path]:
    """Write the run's files (see `output_files`; `formats`: CSV or Parquet tables, JSON or
    gzip'd trace) and `manifest.json` into `out_dir` (created if missing); returns the paths
    written, manifest last.

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
    files, previous = output_files(result, formats), _previous_manifest(out) or {}
    header = {"written_by": WRITTEN_BY, "scenario": result.config.name, "seed": result.config.seed}
    pending = dict.fromkeys([*previous, *files])
    write_atomic(out / MANIFEST_NAME, _manifest_text({**header, "complete": False, "files": pending}))
    written = {}
    for name, render in files.items():
        written[name] = _write_file(out / name, render())
    for name in previous:
        if name not in written:
            _remove_file(out / name)
    write_atomic(out / MANIFEST_NAME, _manifest_text({**header, "complete": True, "files": written}))
    return [*(out / name for name in written), out / MANIFEST_NAME]


def _write_file(path: Path, pieces: Iterable[Piece]) -> dict:
    """Stream `pieces` into `path` (whole or not at all); its manifest entry: size and SHA-256."""
    digest, size = hashlib.sha256(), 0
    with atomic_open(path, binary=True) as file:
        for piece in pieces:
            file.write(piece)
            digest.update(piece)
            size += memoryview(piece).nbytes
    return {"bytes": size, "sha256": digest.hexdigest()}


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
