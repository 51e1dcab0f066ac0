"""Uploaded traces live in a per-session temporary folder, so a scenario can name their path."""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path

import streamlit as st

MAX_UPLOAD_BYTES = 200 * 1024 * 1024
FOLDER_KEY = "wl_upload_dir"


def save_upload(upload) -> Path:
    """Write the uploaded file into this session's folder (created on first use); returns its
    path. The name keeps only safe characters, so messages still name the user's file; a
    subfolder named by the content's hash gives new content a new path (caches keyed on the
    scenario, which holds the path, then never return results of an older file)."""
    if upload.size > MAX_UPLOAD_BYTES:
        raise ValueError(f"{upload.name}: file is {upload.size} bytes, over the {MAX_UPLOAD_BYTES}-byte upload limit")
    if FOLDER_KEY not in st.session_state:
        st.session_state[FOLDER_KEY] = tempfile.mkdtemp(prefix="llm-explorer-")
    data = upload.getvalue()
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(upload.name).name) or "trace.csv"
    path = Path(st.session_state[FOLDER_KEY]) / hashlib.sha256(data).hexdigest()[:16] / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path
