"""Uploaded files: traces become files the scenario can reference; scenario YAML is parsed.

A trace is stored under the system temp folder at `<sha256 prefix>/<its own name>`: the same
bytes map to the same path (cache hits across reruns, across pages), new content gets a new path
(caches keyed on the scenario never return an older file's results), and a path cannot be
guessed without the content. Nothing is applied before it validates; messages name the
uploaded file, not the stored path.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path

from sim_core import SimCoreError, parse_config
from sim_core.config.loading import parse_mapping
from sim_core.workload import read_trace

TRACE_ROOT = Path(tempfile.gettempdir()) / "llm-serving-explorer-traces"
MAX_UPLOAD_BYTES = 200 * 1024**2


def store_trace(name: str, data: bytes) -> Path:
    """Write the uploaded bytes to their content-addressed path and return it."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", Path(name).name) or "trace.csv"
    folder = TRACE_ROOT / hashlib.sha256(data).hexdigest()[:24]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / safe
    if not path.exists():
        path.write_bytes(data)
    return path


def save_upload(upload) -> Path:
    """Store a Streamlit UploadedFile (ValueError when over the upload limit)."""
    if upload.size > MAX_UPLOAD_BYTES:
        raise ValueError(f"{upload.name}: file is {upload.size} bytes, over the {MAX_UPLOAD_BYTES}-byte upload limit")
    return store_trace(upload.name, upload.getvalue())


def check_trace(name: str, data: bytes) -> tuple[Path | None, str, list[str]]:
    """(stored path or None, error message or "", notes) for an uploaded trace in any format
    the core reads (detected from its columns)."""
    if len(data) > MAX_UPLOAD_BYTES:
        return None, f"{name}: file is {len(data)} bytes, over the {MAX_UPLOAD_BYTES}-byte upload limit", []
    path = store_trace(name, data)
    try:
        read = read_trace(path)
    except SimCoreError as error:
        return None, str(error).replace(str(path), name), []
    work = read.workload
    arrived, prefill, decode = work.arrived_at, work.num_prefill_tokens, work.num_decode_tokens
    span = f"over {arrived[-1] - arrived[0]:.1f} s" if read.has_arrivals else "without arrival times"
    summary = (f"{name}: {len(arrived):,} requests {span}; prompts {int(prefill.min())}..{int(prefill.max())} "
               f"tokens, outputs {int(decode.min())}..{int(decode.max())}")
    return path, "", [summary] + [note.replace(str(path), name) for note in work.notes]


def check_scenario_file(name: str, data: bytes) -> tuple[dict | None, str]:
    """(scenario mapping or None, error message or "") for an uploaded YAML/JSON scenario."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})"
    try:
        mapping = parse_mapping(text, name)
        parse_config(mapping, source=name)
    except SimCoreError as error:
        return None, str(error)
    return mapping, ""
