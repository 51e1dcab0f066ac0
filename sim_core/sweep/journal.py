"""The resume journal: `points.jsonl` in the output folder, one JSON line per finished point,
written as each finishes, so an interrupted sweep loses at most the points still running."""

from __future__ import annotations

import json
from pathlib import Path

JOURNAL_NAME = "points.jsonl"


class Journal:
    """Finished points of a sweep, keyed by point key (see `grid.point_key`)."""

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / JOURNAL_NAME
        self._file = None

    def load(self) -> dict[str, dict]:
        """key -> record of every complete line (a line cut short by a kill is ignored)."""
        if not self.path.is_file():
            return {}
        records = {}
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and "key" in record:
                records[record["key"]] = record
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


def _ends_mid_line(path: Path) -> bool:
    if not path.is_file() or not path.stat().st_size:
        return False
    with path.open("rb") as file:
        file.seek(-1, 2)
        return file.read(1) != b"\n"
