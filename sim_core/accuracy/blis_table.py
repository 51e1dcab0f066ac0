"""Reader for BLIS's validation tables: `blis_trainval_specs.json` (per experiment: model, GPU,
TP, vLLM knobs, KV blocks and the inference-perf load) beside `blis_trainval_actuals.csv`
(measured mean/p90/p99 of E2E and TTFT in ms and the time per output token from the means, per
experiment and stage; `stage_index` -1 is the whole run).

A model outside the catalog is built from `model_configs/<dir>/config.json` when the files hold
it (quantized checkpoints included: `catalog/hf_quantization.py`); a config the import refuses
(a key it does not know that would change shapes or memory) marks the run inexpressible.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from sim_core.accuracy.client_load import LoadStage, empty_workload, shared_prefix_workload, stage_windows
from sim_core.accuracy.measured import WHOLE_RUN, MeasuredRun, MeasuredStage
from sim_core.accuracy.server import device_of, model_of, vllm_scenario
from sim_core.catalog.hf_import import model_from_hf_config
from sim_core.errors import ConfigError

SPECS, ACTUALS = "blis_trainval_specs.json", "blis_trainval_actuals.csv"
MS = 1e-3
COLUMNS = {("e2e", "mean"): "e2e_mean_ms", ("e2e", "p90"): "e2e_p90_ms", ("e2e", "p99"): "e2e_p99_ms",
           ("ttft", "mean"): "ttft_mean_ms", ("ttft", "p90"): "ttft_p90_ms", ("ttft", "p99"): "ttft_p99_ms"}
# The table's own `tpot_from_means_ms` divides by the output length the client counted (lower than
# the tokens generated for Llama-2 tokenizers, which re-tokenise differently): the comparison
# computes `itl` from the means with the generated length instead, as for the simulated run.


class Inexpressible(ConfigError):
    """The run needs a model feature the catalog cannot express yet."""


def is_blis_table(names: set[str]) -> bool:
    return SPECS in names and ACTUALS in names


def read_blis_table(files: Mapping[str, bytes], device: str | None, seed: int) -> list[MeasuredRun]:
    """Every experiment of the specs that has measured rows (those the catalog cannot express
    yet are marked `unsupported`, with the reason)."""
    try:
        specs = json.loads(files[SPECS]).get("experiments")
    except (ValueError, AttributeError) as exc:
        raise ConfigError(f"{SPECS}: not a JSON object with 'experiments' ({exc})") from None
    if not isinstance(specs, list):
        raise ConfigError(f"{SPECS}: 'experiments' must be a list")
    actuals = _actual_rows(files[ACTUALS])
    runs = []
    for spec in specs:
        rows = [row for row in actuals if _same_experiment(row, str(spec.get("id", "")))]
        if not rows:
            continue
        name = rows[0]["experiment"]
        try:
            runs.append(_run(name, spec, rows, files, device, seed))
        except Inexpressible as exc:
            runs.append(MeasuredRun(name, "blis_table", {}, empty_workload(f"{SPECS}#{name}"), (), 0.0,
                                    unsupported=str(exc)))
    return runs


def _same_experiment(row: dict[str, str], spec_id: str) -> bool:
    return bool(spec_id) and (row["exp_id"] == spec_id or row["experiment"] == spec_id
                              or row["experiment"].startswith(spec_id + "-"))


def _run(name: str, spec: dict[str, Any], rows: list[dict[str, str]], files: Mapping[str, bytes],
         device: str | None, seed: int) -> MeasuredRun:
    workload_spec = spec.get("workload") or {}
    client = workload_spec.get("inference_perf") or {}
    shared = client.get("shared_prefix") or {}
    stages = [LoadStage(float(s["rate"]), float(s["duration"])) for s in client.get("stages") or []]
    if not shared or not stages:
        raise ConfigError(f"{SPECS}: experiment {spec.get('id')}: no inference_perf shared_prefix load")
    model, extra = _model(spec, files)
    gpu = device or device_of(str(spec.get("hardware", "")))
    if gpu is None:
        raise Inexpressible(f"GPU {spec.get('hardware')!r} has no catalog entry")
    knobs = {"max_num_seqs": spec.get("max_num_seqs"), "max_num_batched_tokens": spec.get("max_num_batched_tokens"),
             "total_kv_blocks": spec.get("total_kv_blocks")}
    scenario = vllm_scenario(name, model, gpu, int(spec.get("tp") or 1), knobs, seed, extra)
    prompt = int(shared.get("system_prompt_len", 0)) + int(shared.get("question_len", 0))
    output = int(shared["output_len"])
    workload = shared_prefix_workload(stages, "constant", prompt, output, np.random.default_rng(seed),
                                      f"{SPECS}#{name}", system_tokens=int(shared.get("system_prompt_len", 0)))
    windows = [(0.0, sum(s.duration_s for s in stages)), *stage_windows(stages)]
    measured = []
    for row in sorted(rows, key=lambda r: int(r["stage_index"])):
        index = int(row["stage_index"])
        window = windows[0] if index == WHOLE_RUN else windows[index + 1]
        rate = float("nan") if index == WHOLE_RUN else stages[index].rate
        measured.append(MeasuredStage(index, window[0], window[1], rate, 0, 0, _values(row)))
    notes = [f"prompts of {prompt} tokens (system + question; the table has no measured length)"]
    if int(spec.get("cpu_kv_blocks") or 0):
        notes.append(f"CPU KV-cache offloading ({spec['cpu_kv_blocks']} blocks) was on: not modelled")
    return MeasuredRun(name, "blis_table", scenario, workload, tuple(measured), float(output), notes=tuple(notes))


def _model(spec: dict[str, Any], files: Mapping[str, bytes]) -> tuple[str, dict[str, Any]]:
    """Catalog id of the spec's model, or an id plus the model built from its config.json."""
    repository = str(spec.get("model", ""))
    found = model_of(repository)
    if found:
        return found, {}
    path = f"{str(spec.get('model_config_dir', '')).strip('/')}/config.json"
    if path not in files:
        raise Inexpressible(f"model {repository!r} has no catalog entry and {path} is not among the files")
    config = json.loads(files[path])
    key = repository.lower().split("/")[-1]
    try:
        shape = model_from_hf_config(config, path, repository)
    except ConfigError as error:
        raise Inexpressible(str(error)) from None
    return key, {key: shape.model_dump()}


def _values(row: dict[str, str]) -> dict[str, dict[str, float]]:
    values: dict[str, dict[str, float]] = {}
    for (metric, stat), column in COLUMNS.items():
        if row.get(column):
            values.setdefault(metric, {})[stat] = float(row[column]) * MS
    return values


def _actual_rows(data: bytes) -> list[dict[str, str]]:
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8", errors="replace"))))
    needed = {"experiment", "exp_id", "stage_index", *COLUMNS.values()}
    if not rows or not needed <= set(rows[0]):
        raise ConfigError(f"{ACTUALS}: expected columns {', '.join(sorted(needed))}")
    return rows
