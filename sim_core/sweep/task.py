"""What a backend ships to a worker and back: JSON text, so any process or machine can run it."""

from __future__ import annotations

import json

from sim_core.sweep.grid import Point
from sim_core.sweep.search import capacity_search
from sim_core.sweep.spec import SearchSettings, SweepSpec

INTERNAL_ERROR = "internal_error"   # the key of a worker's answer when the task hit a bug


def point_task(point: Point, spec: SweepSpec) -> str:
    """The JSON a worker needs to search one point's capacity."""
    return json.dumps({"scenario": point.scenario, "slo": spec.slo, "search": spec.search.model_dump()})


def run_task(task: str) -> str:
    """Search the capacity of the point described by `task` (from point_task); JSON of Capacity."""
    data = json.loads(task)
    capacity = capacity_search(data["scenario"], data["slo"], SearchSettings.model_validate(data["search"]))
    return json.dumps(capacity.to_json())
