"""A sweep that runs on a background thread, so it outlives the page run that started it (a
Streamlit script run ends at every interaction); the page polls `snapshot()`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from sim_core.errors import SimCoreError
from sim_core.export.text import VALUE_LIMIT, one_line, shorten
from sim_core.sweep.grid import build_grid
from sim_core.sweep.journal import Journal
from sim_core.sweep.runner import SweepBackend, resumed_records, run_sweep
from sim_core.sweep.spec import SweepSpec


@dataclass(frozen=True)
class JobState:
    """What a job has done so far.

    Attributes:
        status: "running", "finished", "stopped" (by stop(); resumable) or "failed".
        done, total: finished points and points in the grid.
        records: finished points, in grid order.
        error: why it failed (one line), else None.
        notes: warnings (e.g. damaged journal lines set aside).
    """

    status: str
    done: int
    total: int
    records: list[dict]
    error: str | None
    notes: tuple[str, ...] = ()


class SweepJob:
    """Runs `run_sweep` on a daemon thread with a journal in `out_dir` (resumable)."""

    def __init__(self, spec: SweepSpec, base: dict, backend: SweepBackend, out_dir: str | Path) -> None:
        """Builds the grid at once (a bad spec raises ConfigError here, not in the thread)."""
        self.spec, self.base, self.backend, self.out_dir = spec, base, backend, Path(out_dir)
        self.grid = build_grid(spec, base)
        journal = Journal(out_dir)
        self._records = resumed_records(self.grid, journal.load())
        self._notes = list(journal.notes)
        self._status = "running"
        self._error: str | None = None
        self._stop, self._lock = threading.Event(), threading.Lock()
        self._thread = threading.Thread(target=self._run, name="sweep-job", daemon=True)

    def start(self) -> SweepJob:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the job soon: points finished are kept, points running are dropped (the
        backend's stop(), when it has one, ends them within a second)."""
        self._stop.set()
        if hasattr(self.backend, "stop"):
            self.backend.stop()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def snapshot(self) -> JobState:
        with self._lock:
            records = [self._records[p.key] for p in self.grid.points if p.key in self._records]
            return JobState(self._status, len(records), len(self.grid.points), records, self._error,
                            tuple(self._notes))

    def _on_point(self, done: int, total: int, record: dict) -> None:
        with self._lock:
            self._records[record["key"]] = record

    def _run(self) -> None:
        notes = []
        try:
            outcome = run_sweep(self.spec, self.base, self.backend, self.out_dir, on_point=self._on_point,
                                should_stop=self._stop.is_set)
            status, error, notes = ("finished" if outcome.complete else "stopped"), None, outcome.notes
        except SimCoreError as failure:
            status, error = "failed", one_line(failure, VALUE_LIMIT * 2)
        except Exception as failure:  # noqa: BLE001 - a bug: say so in one line, keep the server alive
            status, error = "failed", f"internal error: {type(failure).__name__}: {shorten(failure)}"
        with self._lock:
            self._status, self._error = status, error
            self._notes.extend(notes)
