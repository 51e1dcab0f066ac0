"""Which files a scenario may name when it comes from someone other than the machine's user.

The CLI opens whatever path its user gives. A scenario that arrives from the web (a shared
link, an uploaded YAML) is data from a stranger: it may name files only inside the folders the
server chose (its upload store and the shipped samples), and nothing it names is opened before
this check passes. A refusal never says whether the file exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sim_core.errors import ConfigError

# Every scenario field that names a file or folder, as a dotted path ("*" = any key of a mapping).
# tests/test_file_policy.py checks that this list covers every such field of SimulationConfig.
PATH_FIELDS = (
    "workload.trace_file",
    "workload.arrival.trace_file",
    "workload.prompt_tokens.trace_file",
    "workload.output_tokens.trace_file",
    "predictor.profiles_dir",
    "predictor.cache_dir",
    "predictor.calibration",
    "models.*.hf_config",
)
# Fields that make the server write, or read a file the visitor cannot upload: never from the web.
SERVER_ONLY_FIELDS = {
    "predictor.cache_dir": "the server alone chooses where it writes",
    "predictor.calibration": "set the fitted knob values in the scenario instead",
    "models.*.hf_config": "paste the model's fields under models.<id> instead",
}
PROFILE_FIELD = "predictor.profiles_dir"


def confine_paths(data: Mapping[str, Any], trace_roots: Sequence[str | Path],
                  profile_roots: Sequence[str | Path] = (), source: str = "scenario") -> None:
    """Refuse a scenario mapping that names a file outside the allowed folders (checked before any
    is opened): traces only inside `trace_roots`, profile folders only inside `profile_roots`.

    Relative paths are taken from the current folder, as the core opens them; symbolic links
    are resolved, so a link inside a root that points outside is refused too.

    Raises:
        ConfigError: one line naming the field; it does not say whether the file exists.
    """
    traces = [Path(os.path.realpath(root)) for root in trace_roots]
    profiles = [Path(os.path.realpath(root)) for root in profile_roots]
    for field, value in _named_paths(data):
        pattern = _pattern_of(field)
        if pattern in SERVER_ONLY_FIELDS:
            raise ConfigError(f"{source}: {field}: not accepted from a link or an upload "
                              f"({SERVER_ONLY_FIELDS[pattern]})")
        if not isinstance(value, str):
            continue                      # not a path at all: validation names the type
        if field == PROFILE_FIELD and not _inside(value, profiles):
            raise ConfigError(f"{source}: {field}: only profile folders this server allows can be used here "
                              "(whoever starts it lists them in SIM_EXPLORER_PROFILE_ROOTS)")
        if field != PROFILE_FIELD and not _inside(value, traces):
            raise ConfigError(f"{source}: {field}: only uploaded traces and the shipped sample traces can be "
                              "used here; upload the file on the Scenario or Workload page")


def _named_paths(data: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(dotted field, value) for every path field present (and not null) in `data`."""
    found: list[tuple[str, Any]] = []
    for pattern in PATH_FIELDS:
        found.extend(_lookup(data, pattern.split("."), []))
    return found


def _lookup(node: Any, parts: list[str], seen: list[str]) -> list[tuple[str, Any]]:
    if not parts:           # hf_config counts even when null: the loader acts on the key's presence
        field = ".".join(seen)
        return [] if node is None and _pattern_of(field) != "models.*.hf_config" else [(field, node)]
    if not isinstance(node, Mapping):
        return []
    head, rest = parts[0], parts[1:]
    children = list(node.items()) if head == "*" else [(head, node[head])] if head in node else []
    return [hit for key, child in children for hit in _lookup(child, rest, [*seen, str(key)])]


def _pattern_of(field: str) -> str:
    parts = field.split(".")
    return "models.*.hf_config" if parts[0] == "models" and len(parts) == 3 else field


def _inside(value: str, roots: list[Path]) -> bool:
    if "\x00" in value or not value.strip():
        return False
    resolved = Path(os.path.realpath(value))
    return any(resolved.is_relative_to(root) for root in roots)
