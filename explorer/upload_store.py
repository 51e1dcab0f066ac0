"""The server's private store of uploaded files.

One folder per server process, made by `mkdtemp` (mode 0700, a fresh unpredictable name, so no
other user of the machine can plant or read files there). A file is stored under a name the
server chooses, the SHA-256 of its bytes plus a suffix from a fixed list; the browser's file name
is display text only and never touches the file system. Files are created exclusively (0600, no
symbolic link followed). The same bytes map to the same path (cache hits across reruns and
pages; a new content gets a new path, so caches keyed on the scenario never return an older
file's results). The store keeps at most `quota_bytes` and forgets files older than
`max_age_s`, oldest first.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

SUFFIXES = (".csv", ".jsonl", ".json", ".yaml", ".yml", ".txt")
# the shape of a name `keep` gives a file (its bytes' SHA-256 and a suffix), on this server or another
STORE_NAME = re.compile(r"^[0-9a-f]{64}\.[a-z]+$")


class UploadStore:
    """Content-addressed private folder of uploads with a size quota and an age limit."""

    def __init__(self, quota_bytes: int, max_age_s: float, parent: str | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="llm-explorer-uploads-", dir=parent))
        self.quota_bytes = quota_bytes
        self.max_age_s = max_age_s
        self._lock = threading.Lock()

    def keep(self, data: bytes, display_name: str, check: Callable[[Path], None] | None = None) -> Path:
        """Store `data` (named by its hash) and return its path; `check(path)` may raise to refuse
        it, and then nothing stays behind. The suffix comes from `display_name` when it is one of
        SUFFIXES, else `.csv`.

        Raises:
            ValueError: the file alone is larger than the quota.
            whatever `check` raises (the file is removed first).
        """
        if len(data) > self.quota_bytes:
            raise ValueError(f"file is {len(data):,} bytes, over the upload store's {self.quota_bytes:,}-byte quota")
        suffix = Path(display_name).suffix.lower()
        path = self.root / (hashlib.sha256(data).hexdigest() + (suffix if suffix in SUFFIXES else ".csv"))
        with self._lock:
            fresh = not path.exists()
            if fresh:
                self._make_room(len(data))
                _write_exclusive(path, data)
            else:
                os.utime(path)                    # a reuse counts as recent for the age limit
        if check is not None and fresh:
            try:
                check(path)
            except BaseException:
                path.unlink(missing_ok=True)
                raise
        return path

    def files(self) -> list[Path]:
        """The stored files, oldest first (by last use)."""
        entries = [p for p in self.root.iterdir() if p.is_file()]
        return sorted(entries, key=lambda p: p.stat().st_mtime)

    def _make_room(self, incoming: int) -> None:
        """Drop files past the age limit, then the oldest until `incoming` bytes fit the quota."""
        now = time.time()
        files = self.files()
        total = sum(p.stat().st_size for p in files)
        for path in files:
            expired = now - path.stat().st_mtime > self.max_age_s
            if not expired and total + incoming <= self.quota_bytes:
                continue
            total -= path.stat().st_size
            path.unlink(missing_ok=True)


def _write_exclusive(path: Path, data: bytes) -> None:
    """Create `path` (0600) and write `data`; refuses an existing name or a symbolic link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(path, flags, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
