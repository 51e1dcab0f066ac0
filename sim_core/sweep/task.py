"""What a backend ships to a worker and back: JSON text, so any process or machine can run it.

A point that cannot be searched (an unreadable trace, a user error the search does not take as
"infeasible", a bug met while simulating it) comes back as a failed point, `failed_point(...)`,
so the sweep records it and goes on; only a task that is not a task at all (the worker cannot
read it) is answered with INTERNAL_ERROR, which stops the sweep.
"""

from __future__ import annotations

import json

from sim_core.errors import SimCoreError, TraceError
from sim_core.export.text import one_line, shorten
from sim_core.sweep.grid import Point
from sim_core.sweep.search import capacity_search
from sim_core.sweep.spec import SearchSettings, SweepSpec

INTERNAL_ERROR = "internal_error"   # the key of a worker's answer when the task hit a bug
PARENT_ENV = "SIM_CORE_SWEEP_PARENT"  # a local worker's parent process id (see sim_core.sweep.worker)
ERROR_LIMIT = 300                   # characters of a failed point's error text


def point_task(point: Point, spec: SweepSpec) -> str:
    """The JSON a worker needs to search one point's capacity."""
    return json.dumps({"scenario": point.scenario, "slo": spec.slo, "search": spec.search.model_dump()})


def run_task(task: str) -> str:
    """Search the capacity of the point described by `task` (from point_task); JSON of Capacity,
    or of `failed_point` when the search raised.

    Raises:
        ValueError, KeyError, TypeError: `task` is not a task (a bug in the backend).
    """
    data = json.loads(task)
    scenario, slo, settings = data["scenario"], data["slo"], SearchSettings.model_validate(data["search"])
    try:
        capacity = capacity_search(scenario, slo, settings)
    except Exception as error:  # noqa: BLE001 - one point's failure must not end the sweep
        return json.dumps(failed_point(describe_failure(error)))
    return json.dumps(capacity.to_json())


def failed_point(error: str) -> dict:
    """A Capacity-shaped answer for a point that could not be searched: no max_qps, the reason."""
    return {"max_qps": None, "binding_slo": None, "at_capacity": None, "probes": [],
            "error": one_line(error, ERROR_LIMIT)}


def describe_failure(error: BaseException) -> str:
    """One line for a point's error that never quotes a file's content: a trace error names the
    file, row and column only (`python -m sim_core validate FILE` tells the reason)."""
    if isinstance(error, TraceError):
        where = ", ".join(filter(None, [shorten(error.file), f"row {error.row}" if error.row else None,
                                        error.column and f"column '{shorten(error.column, 60)}'"]))
        return f"trace error: {where}: cannot be read (run `python -m sim_core validate` on it for the reason)"
    if isinstance(error, SimCoreError):
        return f"error: {shorten(error)}"
    if isinstance(error, OSError):
        return f"error: {shorten(error.filename or '')}: {error.strerror or type(error).__name__}"
    return f"internal error: {type(error).__name__}: {shorten(error)}"
