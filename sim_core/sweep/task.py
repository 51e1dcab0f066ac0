"""What a backend ships to a worker and back: JSON text, so any process or machine can run it.

A point that cannot be searched (an unreadable trace, a user error the search does not take as
"infeasible", a bug met while simulating it) comes back as a failed point, `failed_point(...)`,
so the sweep records it and goes on; only a task that is not a task at all (the worker cannot
read it) is answered with INTERNAL_ERROR, which stops the sweep.

Points that differ only in the batch cap travel as one group task (`plan_tasks`): the worker
searches them largest cap first, replaying the probes `sweep/reuse.py` proves identical, and
answers a JSON list, one answer per point.
"""

from __future__ import annotations

import json

from sim_core.errors import SimCoreError, TraceError
from sim_core.export.text import one_line, shorten
from sim_core.sweep.grid import Point
from sim_core.sweep.reuse import ProbeMemo, cap_order, group_key
from sim_core.sweep.search import RunProbe, capacity_search
from sim_core.sweep.spec import SearchSettings, SweepSpec

INTERNAL_ERROR = "internal_error"   # the key of a worker's answer when the task hit a bug
PARENT_ENV = "SIM_CORE_SWEEP_PARENT"  # a local worker's parent process id (see sim_core.sweep.worker)
ERROR_LIMIT = 300                   # characters of a failed point's error text


def point_task(point: Point, spec: SweepSpec) -> str:
    """The JSON a worker needs to search one point's capacity."""
    return json.dumps({"scenario": point.scenario, "slo": spec.slo, "search": spec.search.model_dump()})


def group_task(points: list[Point], spec: SweepSpec) -> str:
    """The JSON a worker needs to search points that differ only in the batch cap."""
    return json.dumps({"scenarios": [point.scenario for point in points], "slo": spec.slo,
                       "search": spec.search.model_dump()})


def plan_tasks(points: list[Point], spec: SweepSpec, min_tasks: int = 1) -> list[tuple[list[int], str]]:
    """(indices into `points`, task) covering every point once: a group task for each set of
    points that differ only in the batch cap (`reuse.group_key`), a point task for the rest.
    While there are fewer than `min_tasks` tasks (workers would idle), the largest group is
    split into its larger and its smaller caps (each half still reuses within itself)."""
    keyed: dict[str, list[int]] = {}
    for index, point in enumerate(points):
        keyed.setdefault(group_key(point.scenario), []).append(index)
    groups = [[members[i] for i in cap_order([points[m].scenario for m in members])] for members in keyed.values()]
    while len(groups) < min_tasks and max(map(len, groups), default=1) > 1:
        largest = max(groups, key=len)
        half = (len(largest) + 1) // 2
        groups[groups.index(largest):groups.index(largest) + 1] = [largest[:half], largest[half:]]
    return [(sorted(members), point_task(points[members[0]], spec) if len(members) == 1
             else group_task([points[i] for i in sorted(members)], spec)) for members in groups]


def task_answers(indices: list[int], result: str) -> list[tuple[int, dict]]:
    """(point index, answer) for each point of a task from its result JSON: a group's list, or
    one answer (a point's, or a failure of the whole task: its worker died) for every point."""
    answer = json.loads(result)
    return list(zip(indices, answer)) if isinstance(answer, list) else [(index, answer) for index in indices]


def run_task(task: str) -> str:
    """Search the capacity of the point described by `task` (from point_task); JSON of Capacity,
    or of `failed_point` when the search raised; of a group task (group_task), a JSON list of
    them in the task's order.

    Raises:
        ValueError, KeyError, TypeError: `task` is not a task (a bug in the backend).
    """
    data = json.loads(task)
    scenarios: list[dict] = data["scenarios"] if "scenarios" in data else [data["scenario"]]
    slo, settings = data["slo"], SearchSettings.model_validate(data["search"])
    if "scenarios" in data:
        return json.dumps(search_group(scenarios, slo, settings))
    return json.dumps(searched(scenarios[0], slo, settings))


def search_group(scenarios: list[dict], slo: dict, settings: SearchSettings) -> list[dict]:
    """The answers (as `searched`) of scenarios that differ only in the batch cap, in their
    order, searched largest cap first through one `ProbeMemo`."""
    memo = ProbeMemo()
    answers: list[dict] = [{} for _ in scenarios]
    for index in cap_order(scenarios):
        answers[index] = searched(scenarios[index], slo, settings, memo.run)
    return answers


def searched(scenario: dict, slo: dict, settings: SearchSettings, run: RunProbe | None = None) -> dict:
    """Capacity JSON of one scenario, or `failed_point` when its search raised."""
    try:
        capacity = capacity_search(scenario, slo, settings, run)
    except Exception as error:  # noqa: BLE001 - one point's failure must not end the sweep
        return failed_point(describe_failure(error))
    return capacity.to_json()


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
