"""A calibration file (written by `python -m sim_core calibrate`) and how a scenario uses it.

A scenario names one as `predictor: {calibration: path}`; when the scenario is loaded, its fitted
knobs fill the predictor and scheduler sections wherever the scenario does not set them itself
(a value written in the scenario wins) and the key is consumed: the validated scenario holds the
values, so its dump reproduces the run without the file. The file is YAML:

    calibration: {engine: vllm_v1, device: h100-sxm, predictor: roofline, runs: [...], ...}
    predictor: {memory_efficiency: 0.86, cpu_sample_s: 0.0004, ...}
    scheduler: {api_server_s: 0.0061}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim_core.config.policies import default_policy, policy_config
from sim_core.errors import ConfigError

MAX_CALIBRATION_BYTES = 1_000_000
SECTIONS = ("predictor", "scheduler")   # the sections a calibration may fill


def read_calibration(path: Path) -> dict[str, Any]:
    """The calibration file's mapping (checked: a mapping with mapping sections).

    Raises:
        ConfigError: missing, too large, not YAML, or not shaped like a calibration.
    """
    from sim_core.config.loading import read_mapping  # loading imports this module

    if path.is_file() and path.stat().st_size > MAX_CALIBRATION_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CALIBRATION_BYTES} bytes; not a calibration file")
    data = read_mapping(path)
    if not isinstance(data.get("calibration"), dict):
        raise ConfigError(f"{path}: not a calibration file (no 'calibration' section; write one with "
                          "`python -m sim_core calibrate`)")
    for section in SECTIONS:
        if not isinstance(data.get(section, {}), dict):
            raise ConfigError(f"{path}: {section}: expected a mapping of knob values")
    return data


def apply_calibration(data: dict[str, Any], base_dir: str | Path | None) -> dict[str, Any]:
    """The scenario mapping with its `predictor.calibration` file's knobs filled in under the
    scenario's own (a relative path is taken from `base_dir`); unchanged when it names none."""
    predictor = data.get("predictor")
    if not isinstance(predictor, dict) or "calibration" not in predictor:
        return data
    if not predictor["calibration"]:
        return {**data, "predictor": {k: v for k, v in predictor.items() if k != "calibration"}}
    path = Path(str(predictor["calibration"]))
    if base_dir is not None and not path.is_absolute():
        path = Path(base_dir) / path
    fitted = read_calibration(path)
    _check_host_knobs(path, fitted, data)
    out = dict(data)
    for section in SECTIONS:
        knobs = fitted.get(section) or {}
        found = out.get(section)
        current: dict[str, Any] = found if isinstance(found, dict) else {}
        if section == "scheduler":   # a policy's knobs apply only to that policy (absent: the default one)
            engine = str(fitted["calibration"].get("engine", ""))
            if engine and (current.get("type") or default_policy()) != engine:
                continue
        out[section] = {**knobs, **current}
    out["predictor"] = {key: value for key, value in out["predictor"].items() if key != "calibration"}
    return out


def _check_host_knobs(path: Path, fitted: dict[str, Any], data: dict[str, Any]) -> None:
    """Refuse host-phase knobs an engine would scale a second time: an engine with a host factor
    of its own (vllm_v1's `host_scale`) multiplies the predictor's `cpu_*` knobs by it, and
    `calibrate` writes that factor for such an engine, never scaled phase knobs. A file for it
    that sets phase knobs without the factor was written before the factor existed (its knobs
    are scaled already) or by hand; either way the file must say which factor its knobs assume.

    Raises:
        ConfigError: naming the file, the first such knob and the fix.
    """
    scheduler = data.get("scheduler")
    engine = (scheduler.get("type") if isinstance(scheduler, dict) else None) or default_policy()
    config_class = policy_config(engine)
    if config_class is None or "host_scale" not in config_class.model_fields:
        return
    if str(fitted["calibration"].get("engine", "")) not in ("", engine):
        return   # the file's scheduler knobs do not apply, and it was fitted for another engine's loop
    phases = sorted(key for key in (fitted.get("predictor") or {}) if key.startswith("cpu_"))
    if phases and "host_scale" not in (fitted.get("scheduler") or {}):
        raise ConfigError(f"{path}: predictor.{phases[0]}: a calibration for {engine} sets host-phase knobs but no "
                          f"scheduler.host_scale, so {engine} would scale them again by its default factor; write "
                          "the file again with `python -m sim_core calibrate`, or add scheduler: {host_scale: 1} "
                          "if the knobs are the engine's own times")
