"""Files written whole or not at all.

Each file is written under a temporary name in its own folder (`.NAME.tmp-PID`, created
exclusively, never through a symbolic link) and renamed over NAME (`os.replace`, atomic on
POSIX) only once every byte is written. Any error on the way (disk full, file too large,
permission denied) removes the temporary file, leaves the previous NAME untouched and raises an
`OutputError` naming NAME. The files are not fsync'ed: they survive their process being killed,
not a power loss.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from sim_core.errors import SimCoreError
from sim_core.export.text import shorten

TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.tmp-\d+$")   # what temp_path() names
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class OutputError(SimCoreError):
    """An output file cannot be written (disk full, file too large, permissions); names the file."""


def temp_path(path: str | Path) -> Path:
    """Where `path` is written before it is renamed into place (same folder, so same filesystem)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_open(path: str | Path, binary: bool = False) -> Iterator[IO]:
    """Open a new file that becomes `path` when the `with` block ends without an error.

    Text files are UTF-8 with newlines written as given. The folder is created when missing.

    Raises:
        OutputError: an OSError while creating, writing or renaming (`path` keeps its old
            content, or stays absent; the temporary file is removed).
    """
    path = Path(path)
    temp = temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove(temp)                       # left by a killed process that had our pid
        descriptor = os.open(temp, _CREATE, 0o666)
        file = os.fdopen(descriptor, "wb") if binary else os.fdopen(descriptor, "w", encoding="utf-8", newline="")
        with file:
            yield file
        os.replace(temp, path)
    except OSError as error:
        _remove(temp)
        raise OutputError(f"cannot write {shorten(path)}: {error.strerror or error}") from None
    except BaseException:
        _remove(temp)
        raise


def write_atomic(path: str | Path, data: str | bytes) -> int:
    """Write `data` (text as UTF-8) to `path` whole or not at all; returns the bytes written.

    Raises:
        OutputError: as `atomic_open`.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_open(path, binary=True) as file:
        file.write(raw)
    return len(raw)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
