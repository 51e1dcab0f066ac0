"""Reader for an inference-perf run folder: `profile.yaml` (the client's config: load stages,
data generator, server), `exp-config.yaml` (the vLLM knobs the server ran with) and
`results/*lifecycle_metrics.json` (latency summaries per stage and for the whole run).

The reader takes the files' bytes by relative name, so an upload and a folder on disk read the
same way and no name from the input is ever opened as a path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import yaml

from sim_core.accuracy.client_load import LoadStage, shared_prefix_workload, stage_windows
from sim_core.accuracy.json_files import json_object, number
from sim_core.accuracy.measured import WHOLE_RUN, MeasuredRun, MeasuredStage
from sim_core.accuracy.server import device_of, model_of, vllm_scenario
from sim_core.errors import ConfigError

PROFILE, EXP_CONFIG, SUMMARY = "profile.yaml", "exp-config.yaml", "results/summary_lifecycle_metrics.json"
STAGE_FILE = re.compile(r"results/stage_(\d+)_lifecycle_metrics\.json$")
LATENCIES = {"ttft": "time_to_first_token", "e2e": "request_latency"}
PERCENTILES = {"mean": "mean", "p50": "median", "p90": "p90", "p99": "p99"}


def is_inference_perf(names: set[str]) -> bool:
    """Whether the files look like one inference-perf run folder."""
    return PROFILE in names and SUMMARY in names


def read_inference_perf(name: str, files: Mapping[str, bytes], device: str | None = None,
                        seed: int = 42, fallback_device: str | None = None) -> MeasuredRun:
    """The run in `files` (relative name -> bytes). `device` overrides the GPU the experiment
    config or the run's name gives; `fallback_device` is used when they give none.

    Raises:
        ConfigError: a file is missing or malformed, or the run uses what the replay cannot
            rebuild (the message names the file and field).
    """
    profile = _mapping(files, PROFILE)
    experiment = _mapping(files, EXP_CONFIG) if EXP_CONFIG in files else {}
    stages = _load_stages(profile)
    data = _field(profile, "data", PROFILE)
    if data.get("type") != "shared_prefix":
        raise ConfigError(f"{PROFILE}: data.type {data.get('type')!r}: only shared_prefix runs can be rebuilt")
    shared = _field(data, "shared_prefix", PROFILE)
    summary = _json(files, SUMMARY)
    output_tokens = int(number(shared, "output_len", PROFILE))
    prompt_tokens = _prompt_tokens(shared, summary)
    server = profile.get("server") or {}
    repository = str(experiment.get("model") or server.get("model_name") or "")
    model = model_of(repository)
    if model is None:
        raise ConfigError(f"{EXP_CONFIG}: model {repository!r} has no catalog entry")
    device = device or device_of(str(experiment.get("hardware", "")), name) or fallback_device
    if device is None:
        raise ConfigError(f"{name}: no GPU named in {EXP_CONFIG} (hardware) or the run's name; give one (--device)")
    knobs = {key: experiment.get(key) for key in ("max_num_seqs", "max_num_batched_tokens", "max_model_len",
                                                  "block_size", "enable_prefix_caching")}
    scenario = vllm_scenario(name, model, device, int(experiment.get("tensor_parallelism") or 1), knobs, seed)
    kind = str(_field(profile, "load", PROFILE).get("type", "constant"))
    workload = shared_prefix_workload(stages, kind, prompt_tokens, output_tokens, np.random.default_rng(seed),
                                      source=f"{name}/{PROFILE}",
                                      system_tokens=_system_tokens(shared))
    measured = [_stage(summary, WHOLE_RUN, (0.0, sum(s.duration_s for s in stages)), float("nan"), SUMMARY)]
    for index, (window, stage) in enumerate(zip(stage_windows(stages), stages)):
        file = f"results/stage_{index}_lifecycle_metrics.json"
        if file in files:
            measured.append(_stage(_json(files, file), index, window, stage.rate, file))
    notes = _notes(profile, experiment, prompt_tokens, shared)
    saturated = measured[0].num_failed > 0
    return MeasuredRun(name, "inference_perf", scenario, workload, tuple(measured), float(output_tokens),
                       notes=notes, saturated=saturated)


def _notes(profile: dict, experiment: dict, prompt_tokens: int, shared: dict) -> tuple[str, ...]:
    notes = [f"prompts of {prompt_tokens} tokens (the client's measured mean; system "
             f"{shared.get('system_prompt_len')} + question {shared.get('question_len')} before the template)"]
    if shared.get("enable_multi_turn_chat"):
        notes.append("multi-turn chat was on: this client version still sent whole prompts from its pool")
    if experiment.get("cpu_offload") or experiment.get("kv_offloading_size"):
        notes.append("CPU KV-cache offloading was on: not modelled")
    return tuple(notes)


def _stage(report: dict, index: int, window: tuple[float, float], rate: float, file: str) -> MeasuredStage:
    successes = _field(report, "successes", file)
    latency = _field(successes, "latency", file)
    values = {metric: {stat: float(number(_field(latency, key, file), source, file))
                       for stat, source in PERCENTILES.items()} for metric, key in LATENCIES.items()}
    failed = int((report.get("failures") or {}).get("count") or 0)
    sent = int((report.get("load_summary") or {}).get("count") or successes.get("count") or 0)
    return MeasuredStage(index, window[0], window[1], rate, sent, failed, values)


def _system_tokens(shared: dict) -> int:
    """The system prompt's length (0, nothing shared between prompts, when the profile has none)."""
    return int(number(shared, "system_prompt_len", PROFILE, minimum=0)) if "system_prompt_len" in shared else 0


def _prompt_tokens(shared: dict, summary: dict) -> int:
    """The prompt length the server saw: the client's measured mean when reported (it counts the
    chat template and the tokenizer's own splits), else system prompt + question."""
    measured = ((summary.get("successes") or {}).get("prompt_len") or {}).get("mean")
    if isinstance(measured, (int, float)) and measured >= 1:
        return int(round(measured))
    return int(number(shared, "system_prompt_len", PROFILE) + number(shared, "question_len", PROFILE))


def _load_stages(profile: dict) -> list[LoadStage]:
    load = _field(profile, "load", PROFILE)
    if load.get("type", "constant") not in ("constant", "poisson"):
        raise ConfigError(f"{PROFILE}: load.type {load.get('type')!r}: only constant and poisson loads can be rebuilt")
    stages = load.get("stages")
    if not isinstance(stages, list) or not stages:
        raise ConfigError(f"{PROFILE}: load.stages: expected a list of {{rate, duration}}")
    out = []
    for i, stage in enumerate(stages):
        where = f"load.stages[{i}]"
        rate, duration = number(stage, "rate", f"{PROFILE} {where}"), number(stage, "duration", f"{PROFILE} {where}")
        if rate <= 0 or duration <= 0 or rate * duration > 10_000_000:
            raise ConfigError(f"{PROFILE}: {where}: rate {rate} x duration {duration} must be positive and at most "
                              "10,000,000 requests")
        out.append(LoadStage(float(rate), float(duration)))
    return out


def _mapping(files: Mapping[str, bytes], file: str) -> dict[str, Any]:
    if file not in files:
        raise ConfigError(f"{file}: missing from the run folder")
    try:
        data = yaml.safe_load(files[file])
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not YAML/JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: expected a mapping at the top level")
    return data


def _json(files: Mapping[str, bytes], file: str) -> dict[str, Any]:
    if file not in files:
        raise ConfigError(f"{file}: missing from the run folder")
    return json_object(file, files[file])


def _field(mapping: Any, key: str, file: str) -> dict[str, Any]:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if not isinstance(value, dict):
        raise ConfigError(f"{file}: missing section {key!r}")
    return value

