"""Read a scenario from YAML or JSON (safe loaders only) and validate it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sim_core.catalog import load_hf_config
from sim_core.config.calibration_file import apply_calibration
from sim_core.config.documents import DocumentError, parse_json, parse_yaml
from sim_core.config.errors import describe_validation_error
from sim_core.config.simulation import SimulationConfig
from sim_core.errors import ConfigError, clipped

MAX_SCENARIO_BYTES = 5_000_000


def load_config(path: str | Path) -> SimulationConfig:
    """Load and validate a scenario file; relative trace paths resolve against its folder.

    Raises:
        ConfigError: the file is missing, unreadable, not YAML/JSON, or has invalid values
            (the message names the file, the field, the value and the allowed range).
    """
    path = Path(path)
    data = read_mapping(path)
    return parse_config(data, base_dir=path.parent, source=str(path))


def read_mapping(path: Path) -> dict[str, Any]:
    """The top-level mapping of a YAML or JSON file, or a ConfigError saying why not."""
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    if path.stat().st_size > MAX_SCENARIO_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_SCENARIO_BYTES} bytes; not a scenario file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_mapping(text, str(path), json_first=path.suffix.lower() == ".json")


def parse_mapping(text: str, source: str, json_first: bool = False) -> dict[str, Any]:
    """Parse YAML (a superset of JSON) with the safe loader; the result must be a mapping.

    Aliases, nesting, duplicate keys and long integers are limited (see `documents`)."""
    try:
        data = parse_json(text) if json_first else parse_yaml(text)
    except DocumentError as exc:
        where = f"line {exc.line}: " if exc.line is not None else ""
        raise ConfigError(f"{source}: {where}{exc.reason}") from None
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{source}: not valid {'JSON' if json_first else 'YAML'}: "
                          f"{clipped(' '.join(str(exc).split()), 400)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, got {type(data).__name__}")
    return data


def parse_config(data: dict[str, Any], base_dir: str | Path | None = None,
                 source: str = "scenario") -> SimulationConfig:
    """Validate a scenario mapping; `base_dir` anchors relative trace and profile paths."""
    data = apply_calibration(_import_hf_models(data, base_dir, source), base_dir)
    try:
        config = SimulationConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {describe_validation_error(exc, SimulationConfig)}") from None
    return _anchored(config, Path(base_dir)) if base_dir is not None else config


def _anchored(config: SimulationConfig, base_dir: Path) -> SimulationConfig:
    """The scenario with its relative trace and profile paths resolved against `base_dir` (in
    the sections whose choice has them)."""
    def resolved(section: Any, name: str) -> Any:
        path = getattr(section, name, None)
        if not path or Path(path).is_absolute():
            return section
        return section.model_copy(update={name: str((base_dir / path).resolve())})

    spec = config.workload
    spec = resolved(spec, "trace_file").model_copy(update={
        part: resolved(getattr(spec, part), "trace_file") for part in ("arrival", "prompt_tokens", "output_tokens")})
    return config.model_copy(update={"workload": spec, "predictor": resolved(config.predictor, "profiles_dir")})


def _import_hf_models(data: dict[str, Any], base_dir: str | Path | None, source: str) -> dict[str, Any]:
    """`models: {my-id: {hf_config: path/to/config.json}}` -> the imported spec (paths relative
    to the scenario file)."""
    models = data.get("models")
    if not isinstance(models, dict) or not any(isinstance(v, dict) and "hf_config" in v for v in models.values()):
        return data
    resolved = {}
    for key, spec in models.items():
        if isinstance(spec, dict) and "hf_config" in spec:
            path = Path(str(spec["hf_config"]))
            if base_dir is not None and not path.is_absolute():
                path = Path(base_dir) / path
            spec = load_hf_config(path, name=spec.get("name", key)).model_dump()
        resolved[key] = spec
    return {**data, "models": resolved}


def config_to_yaml(config: SimulationConfig) -> str:
    """The scenario as YAML with every knob spelled out (round-trips through load_config)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
