"""Uploaded files: traces become files the scenario can reference; scenario YAML is parsed.

A trace is kept in the server's private upload store (`explorer/upload_store.py`) under the hash of
its bytes, and only once it has been read without error: a file that fails validation leaves
nothing behind. The browser's file name is shown in messages and never used as a path.
"""

from __future__ import annotations

import re
from pathlib import Path

from explorer.server import settings, uploads
from sim_core import SimCoreError
from sim_core.config import SimulationConfig
from sim_core.config.loading import parse_mapping
from sim_core.engine.budget import count_rows
from sim_core.errors import ConfigError
from sim_core.predictor.profile_dir import ProfileSet
from sim_core.predictor.profiles import read_attention, read_mlp
from sim_core.workload import ReadOptions, TraceRead, read_trace

MAX_UPLOAD_BYTES = 200 * 1024**2
MAX_PROFILE_BYTES = 50 * 1024**2
MAX_PROFILE_ROWS = 20_000


def check_trace(name: str, data: bytes, options: ReadOptions | None = None) -> tuple[Path | None, str, list[str]]:
    """(stored path or None, error message or "", notes) for an uploaded trace in any format
    the core reads (detected from its columns unless `options` says otherwise)."""
    if len(data) > MAX_UPLOAD_BYTES:
        return None, f"{name}: file is {len(data):,} bytes, over the {MAX_UPLOAD_BYTES:,}-byte upload limit", []
    options = options or ReadOptions()
    reads: list[TraceRead] = []

    def read(stored: Path) -> None:
        _check_rows(stored, name, options)           # before the reader holds every row in memory
        reads.append(read_trace(stored, options))
    try:
        path = uploads().keep(data, name, check=read)
        read = reads[0] if reads else read_trace(path, options)
    except (SimCoreError, ValueError) as error:
        return None, _renamed(str(error), name), []
    work = read.workload
    arrived, prefill, decode = work.arrived_at, work.num_prefill_tokens, work.num_decode_tokens
    span = f"over {arrived[-1] - arrived[0]:.1f} s" if read.has_arrivals else "without arrival times"
    summary = (f"{name}: {len(arrived):,} requests {span}; prompts {int(prefill.min())}..{int(prefill.max())} "
               f"tokens, outputs {int(decode.min())}..{int(decode.max())}")
    return path, "", [summary] + [_renamed(note, name) for note in work.notes]


def _check_rows(stored: Path, name: str, options: ReadOptions) -> None:
    """Refuse a trace with more rows than the server's run budget allows (counted in bounded memory)."""
    limit = settings().limits.max_trace_rows
    rows = count_rows(str(stored), options.max_bytes)
    if limit is not None and rows > limit:
        raise ConfigError(f"{name}: {rows:,} rows, over this server's limit of {limit:,} trace rows "
                          "(whoever starts it can raise SIM_EXPLORER_MAX_TRACE_ROWS)")


def read_uploaded_profile(config: SimulationConfig, name: str, data: bytes) -> ProfileSet:
    """An uploaded Vidur-format mlp.csv or attention.csv (told apart by its columns), kept in the
    upload store once it has been read without error.

    Raises:
        SimCoreError: the file is too large or not a profile (the message names `name`).
    """
    if len(data) > MAX_PROFILE_BYTES:
        raise ConfigError(f"{name}: file is {len(data):,} bytes, over the {MAX_PROFILE_BYTES:,}-byte profile limit")
    reader = read_attention if b"attn_prefill" in data[:4000] else read_mlp
    frames: list = []

    def read(stored: Path) -> None:
        rows = count_rows(str(stored), MAX_PROFILE_BYTES)
        if rows > MAX_PROFILE_ROWS:                    # every row trains the learned models on this page
            raise ConfigError(f"{name}: {rows:,} rows, over the {MAX_PROFILE_ROWS:,}-row limit of an uploaded "
                              "profile (profile sweeps have a few thousand rows per operator)")
        frames.append(reader(stored))
    try:
        path = uploads().keep(data, name, check=read)
        frame = frames[0] if frames else reader(path)
    except ValueError as error:
        raise ConfigError(f"{name}: {error}") from None
    except SimCoreError as error:
        raise ConfigError(_renamed(str(error), name)) from None
    return ProfileSet(config.device, config.model, frame, [path])


def check_scenario_file(name: str, data: bytes) -> tuple[dict | None, str]:
    """(scenario mapping or None, error message or "") for an uploaded YAML/JSON scenario; it is
    validated as a scenario from the web (files only from the upload store and the samples)."""
    from explorer.state import web_config

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})"
    try:
        mapping = parse_mapping(text, name)
        web_config(mapping, source=name)
    except SimCoreError as error:
        return None, str(error)
    return mapping, ""


def _renamed(message: str, name: str) -> str:
    """A reader's message with the stored file's path replaced by the name the user gave it."""
    stored = re.escape(str(uploads().root)) + r"/[0-9a-f]{64}\.[a-z]+"
    return re.sub(stored, lambda _: name, message)
