"""Uploaded traces live in a per-session temporary folder, so a scenario can name their path."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import streamlit as st

MAX_UPLOAD_BYTES = 200 * 1024 * 1024
FOLDER_KEY = "wl_upload_dir"


def save_upload(upload) -> Path:
    """Write the uploaded file into this session's folder (created on first use); returns its
    path. The name keeps only safe characters, so messages still name the user's file."""
    if upload.size > MAX_UPLOAD_BYTES:
        raise ValueError(f"{upload.name}: file is {upload.size} bytes, over the {MAX_UPLOAD_BYTES}-byte upload limit")
    if FOLDER_KEY not in st.session_state:
        st.session_state[FOLDER_KEY] = tempfile.mkdtemp(prefix="llm-explorer-")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(upload.name).name) or "trace.csv"
    path = Path(st.session_state[FOLDER_KEY]) / name
    path.write_bytes(upload.getvalue())
    return path
