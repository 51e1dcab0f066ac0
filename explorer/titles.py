"""The scenario's title: the name it was loaded with, marked "edited" with the differences listed
once a knob moved away from it, so the sidebar, the Overview and the Chrome trace never name
settings the run does not have."""

from __future__ import annotations

import re
from typing import Any

from sim_core.config.simulation import MAX_NAME_CHARS

EDITED = re.compile(r" \(edited: .*\)$")       # the mark this module adds (stripped from a loaded name)
MAX_LISTED = 6                                  # differences named before "+N more"
_LABELS = {                                      # dotted path -> how a value of it reads in a title
    "cluster.tensor_parallel_size": "TP {}",
    "cluster.pipeline_parallel_size": "PP {}",
    "cluster.num_replicas": "{} replicas",
    "cluster.global_scheduler": "{} router",
    "workload.arrival.qps": "{} req/s",
    "workload.num_requests": "{} requests",
}


def base_name(scenario: dict) -> str:
    """The scenario's name without an "edited" mark."""
    return EDITED.sub("", scenario.get("name") or "scenario")


def differences(origin: dict, current: dict) -> list[str]:
    """The fields of `current` that differ from `origin`, as short labels ("sarathi", "TP 2",
    "7.9 req/s", "block_size 32", "no chunk_size"), in path order; the name is not a difference,
    and a section whose choice (`type`) changed is named by its new choice alone."""
    old, new = _leaves(origin), _leaves(current)
    changed = sorted(path for path in old.keys() | new.keys() if path != "name" and old.get(path) != new.get(path))
    switched = {path[:-len("type")] for path in changed if path.endswith("type") and path in new}
    return [_label(path, new.get(path)) for path in changed
            if path.endswith("type") or not any(path.startswith(section) for section in switched)]


def titled(current: dict, origin: dict) -> dict:
    """`current` named after `origin`: its name, or its name marked "(edited: ...)" with the
    differences when there are any (at most MAX_NAME_CHARS characters)."""
    changes = differences(origin, current)
    name = base_name(origin)
    if changes:
        listed = ", ".join(changes[:MAX_LISTED]) + (f", +{len(changes) - MAX_LISTED} more"
                                                     if len(changes) > MAX_LISTED else "")
        name = f"{name[:MAX_NAME_CHARS - len(listed) - 11]} (edited: {listed})"[:MAX_NAME_CHARS]
    return {**current, "name": name}


def _leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix[:-1]: data}
    leaves: dict[str, Any] = {}
    for key, value in data.items():
        leaves.update(_leaves(value, f"{prefix}{key}."))
    return leaves


def _label(path: str, value: Any) -> str:
    if value is None:
        return f"no {path.rsplit('.', 1)[-1]}"
    if path in _LABELS:
        return _LABELS[path].format(value)
    if path in ("model", "device") or path.endswith("type"):
        return str(value)
    return f"{path.rsplit('.', 1)[-1]} {value}"
