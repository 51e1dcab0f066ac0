"""Run a sweep on a backend: skip points the journal already holds, record each point as it
finishes, write `results.csv` at the end (also after an interruption, with what is done)."""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pandas as pd

from sim_core.errors import ConfigError
from sim_core.sweep.grid import Grid, Point, build_grid
from sim_core.sweep.journal import Journal
from sim_core.sweep.results import results_table, write_results_csv
from sim_core.sweep.spec import SweepSpec
from sim_core.sweep.task import plan_tasks, task_answers

# a sweep's points go to the backend as at least this many tasks per worker (when it says how
# many it has: `workers`), splitting the batch-cap groups (sweep/task.py::plan_tasks) if need be
TASKS_PER_WORKER = 4


class SweepBackend(Protocol):
    """Runs point tasks (JSON text), yielding (task index, JSON answer) as each finishes."""

    def run(self, tasks: list[str]) -> Generator[tuple[int, str], None, None]: ...


@dataclass
class SweepOutcome:
    """What a run of a sweep ended with.

    Attributes:
        grid: the points (and the skipped invalid combinations).
        records: finished points in grid order (from this run and earlier ones), failed points
            included (they have an "error"; they are not journaled, so a rerun tries them again).
        num_resumed: points found finished in the journal (not recomputed).
        num_computed: points computed by this run (failed ones included).
        notes: warnings for the user (e.g. journal lines set aside).
    """

    grid: Grid
    records: list[dict]
    num_resumed: int
    num_computed: int
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return len(self.records) == len(self.grid.points)

    @property
    def failed(self) -> list[dict]:
        """The records of points that failed (each with its "error")."""
        return [record for record in self.records if record.get("error")]


def point_record(point: Point, result: str | dict) -> dict:
    """The journal line of a finished point: what identifies it plus its Capacity (JSON or dict)."""
    capacity = json.loads(result) if isinstance(result, str) else result
    return {**capacity, "key": point.key, "values": point.values, "device": point.device, "num_gpus": point.num_gpus}


def resumed_records(grid: Grid, journal: dict[str, dict]) -> dict[str, dict]:
    """The grid's points the journal holds, key -> record, labelled by this grid (an earlier
    sweep that varied other keys may have found the same scenario)."""
    return {p.key: point_record(p, journal[p.key]) for p in grid.points if p.key in journal}


def run_sweep(spec: SweepSpec, base: dict, backend: SweepBackend, out_dir: str | Path | None = None,
              on_point: Callable[[int, int, dict], None] | None = None, limit: int | None = None,
              should_stop: Callable[[], bool] | None = None) -> SweepOutcome:
    """Search every point's capacity that the journal in `out_dir` does not hold yet.

    A point that fails is recorded with its error (in the outcome and results.csv, not in the
    journal) and the sweep goes on.

    Args:
        backend: LocalBackend or RayBackend (anything with run(tasks) yielding (index, json)).
        out_dir: folder of the journal and results.csv (None: keep nothing on disk).
        on_point: called with (points finished, points in the grid, record) after each point.
        limit: compute at most this many new points (>= 1), then stop (a partial, resumable run).
        should_stop: polled after each point; True stops the run (finished points are kept).

    Raises:
        ConfigError: a bad spec (see build_grid) or limit < 1.
        OutputError: results.csv or the journal cannot be written.
    """
    if limit is not None and limit < 1:
        raise ConfigError(f"limit: got {limit}; allowed 1 .. any number of points (None: every point)")
    grid = build_grid(spec, base)
    journal = Journal(out_dir) if out_dir is not None else None
    done = resumed_records(grid, journal.load() if journal else {})
    resumed = len(done)
    todo = [p for p in grid.points if p.key not in done][:limit]
    tasks = plan_tasks(todo, spec, TASKS_PER_WORKER * getattr(backend, "workers", 1))
    try:
        with closing(backend.run([task for _, task in tasks])) as results:
            for number, result in results:
                _record(tasks[number][0], result, todo, done, journal, on_point, len(grid.points))
                if should_stop and should_stop():
                    break
    finally:
        if journal:
            journal.close()
        outcome = SweepOutcome(grid, [done[p.key] for p in grid.points if p.key in done], resumed, len(done) - resumed,
                               journal.notes if journal else [])
        if out_dir is not None:
            write_results_csv(sweep_table(spec, outcome.records), out_dir)
    return outcome


def _record(indices: list[int], result: str, todo: list[Point], done: dict[str, dict], journal: Journal | None,
            on_point: Callable[[int, int, dict], None] | None, num_points: int) -> None:
    """Record a finished task's points (in `done` and the journal; on_point after each)."""
    for index, answer in task_answers(indices, result):
        record = done[todo[index].key] = point_record(todo[index], answer)
        if journal and not record.get("error"):
            journal.append(record)
        if on_point:
            on_point(len(done), num_points, record)


def sweep_table(spec: SweepSpec, records: list[dict], gpu_hour_usd: float | dict | None = None) -> pd.DataFrame:
    """The results table of a spec's records (price: the spec's unless given)."""
    return results_table(records, list(spec.vary), spec.gpu_hour_usd if gpu_hour_usd is None else gpu_hour_usd)
