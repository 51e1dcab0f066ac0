"""The resume journal: `points.jsonl` in the output folder, one JSON line per finished point,
written as each finishes, so an interrupted sweep loses at most the points still running.

A damaged journal does not block a resume: complete lines that are not a finished point (binary
garbage, invalid UTF-8, JSON of another shape) are moved to `points.jsonl.bad` with a note, and
their points are computed again. A last line without its newline is what a kill mid-write
leaves: it is ignored and kept, and the next append starts a fresh line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TextIO

from sim_core.export.atomic import write_atomic

JOURNAL_NAME = "points.jsonl"
SET_ASIDE_SUFFIX = ".bad"


class Journal:
    """Finished points of a sweep, keyed by point key (see `grid.point_key`).

    Attributes:
        notes: one line per damage found by `load` (lines set aside), for the user.
    """

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / JOURNAL_NAME
        self.set_aside_path = self.path.with_name(JOURNAL_NAME + SET_ASIDE_SUFFIX)
        self.notes: list[str] = []
        self._file: TextIO | None = None

    def load(self) -> dict[str, dict]:
        """key -> record of every usable line; moves unusable complete lines to
        `points.jsonl.bad` (and says so in `notes`)."""
        if not self.path.is_file():
            return {}
        *lines, tail = self.path.read_bytes().split(b"\n")
        records, kept, bad = {}, [], []
        for number, line in enumerate(lines, 1):
            record = parse_record(line)
            if record is not None:
                records[record["key"]] = record
                kept.append(line)
            elif line.strip():
                bad.append((number, line))
        if bad:
            self._set_aside(kept, bad, tail)
        return records

    def append(self, record: dict) -> None:
        """Add one finished point and flush it to the OS (it survives the process being killed)."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            cut = _ends_mid_line(self.path)
            self._file = self.path.open("a", encoding="utf-8")
            if cut:                       # the last run was killed mid-line: start a fresh one
                self._file.write("\n")
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _set_aside(self, kept: list[bytes], bad: list[tuple[int, bytes]], tail: bytes) -> None:
        """Append the bad lines to the set-aside file, then rewrite the journal without them
        (in this order: a failure between the two loses nothing)."""
        with self.set_aside_path.open("ab") as file:
            file.writelines(line + b"\n" for _, line in bad)
        write_atomic(self.path, b"".join(line + b"\n" for line in kept) + tail)
        numbers = ", ".join(str(number) for number, _ in bad[:5]) + (", ..." if len(bad) > 5 else "")
        self.notes.append(f"{self.path}: {len(bad)} unreadable line(s) (line {numbers}) moved to "
                          f"{self.set_aside_path.name}; their points are computed again")


def parse_record(line: bytes) -> dict | None:
    """The finished point a journal line holds, or None when the line is not one."""
    try:
        record = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return record if _is_record(record) else None


def _is_record(record: object) -> bool:
    """The shape `runner.point_record` writes: a key and a Capacity (finite max_qps >= 0)."""
    if not isinstance(record, dict) or not isinstance(record.get("key"), str):
        return False
    max_qps, probes = record.get("max_qps"), record.get("probes")
    return (isinstance(max_qps, (int, float)) and not isinstance(max_qps, bool) and math.isfinite(max_qps)
            and max_qps >= 0 and isinstance(record.get("binding_slo"), str)
            and (record.get("at_capacity") is None or isinstance(record["at_capacity"], dict))
            and isinstance(probes, list) and all(isinstance(p, list) and len(p) == 6 for p in probes))


def _ends_mid_line(path: Path) -> bool:
    if not path.is_file() or not path.stat().st_size:
        return False
    with path.open("rb") as file:
        file.seek(-1, 2)
        return file.read(1) != b"\n"
