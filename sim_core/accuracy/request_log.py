"""Reader for per-request logs of a vLLM server in LLMServingSim's layout: `requests.jsonl` (one
request a line: `request_id`, `input_toks`, `output_toks`, `arrival_time`, `queued_ts`,
`scheduled_ts`, `first_token_ts`, `last_token_ts`) and `meta.json` (`model`, `engine_kwargs`
with vLLM's knobs, `kv_cache` with `num_gpu_blocks`, `block_size`, `enable_prefix_caching`, and
`hardware.device_name`), either at the top or under `vllm/`.

The times are vLLM's own per-request stats (`RequestStateStats`, which LLMServingSim's runner
reads off `AsyncLLM` in process). Two clocks: `arrival_time` is wall-clock (epoch seconds, set
when the engine's front end took the request in, after any tokenization), the `*_ts` are the
engine's monotonic clock. Within a run their difference `queued_ts - arrival_time` is the clock
offset plus the time the request took to reach the engine's queue (the hop to the engine
process, and the rest of the step the engine was running), which is >= 0. The reader takes
the smallest difference over the run as the clock offset (the request that waited least is
taken to have waited nothing), maps each arrival onto the monotonic clock with it, and measures
TTFT = first_token_ts - arrival and E2E = last_token_ts - arrival. The replay's send times are
the arrivals relative to the first.

No API server is in these times: the first and last token times are the engine core's (when its
step's outputs were made), before any detokenization or streaming, and the arrival is after the
prompt was tokenized (LLMServingSim's runner sends token ids to `AsyncLLM`, no HTTP). So the
replay sets vllm_v1's `api_server_s` to 0 (API_SERVER_S).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from sim_core.accuracy.json_files import json_object, number
from sim_core.accuracy.measured import WHOLE_RUN, MeasuredRun, MeasuredStage
from sim_core.accuracy.server import device_of, model_of, vllm_scenario
from sim_core.accuracy.vllm_bench import measured_figures
from sim_core.errors import ConfigError
from sim_core.workload.model import Workload

REQUESTS, META = "requests.jsonl", "meta.json"
FOLDERS = ("", "vllm/")   # where the two files may sit in a run folder
TIMES = ("arrival_time", "queued_ts", "first_token_ts", "last_token_ts")
MAX_REQUESTS = 10_000_000
API_SERVER_S = 0.0   # the engine's own times: no API server's receiving and streaming in them


def log_folder(names: set[str]) -> str | None:
    """The folder prefix ("" or "vllm/") holding both files, if any."""
    return next((f for f in FOLDERS if f + REQUESTS in names and f + META in names), None)


def is_request_log(names: set[str]) -> bool:
    """Whether the files hold one per-request log (requests.jsonl + meta.json)."""
    return log_folder(names) is not None


def read_request_log(name: str, files: Mapping[str, bytes], device: str | None = None, seed: int = 42,
                     fallback_device: str | None = None) -> MeasuredRun:
    """The run in `files`. `device` (a catalog id) overrides the GPU `meta.json` names;
    `fallback_device` is used when it names none.

    Raises:
        ConfigError: a file is missing or malformed, or the model or GPU has no catalog entry
            (the message names the file, line and field).
    """
    folder = log_folder(set(files)) or ""
    meta_file, requests_file = folder + META, folder + REQUESTS
    meta = _meta(meta_file, files[meta_file])
    rows = request_rows(requests_file, files[requests_file])
    engine = _section(meta, "engine_kwargs")
    repository = str(engine.get("model") or meta.get("model") or "")
    model = model_of(repository)
    if model is None:
        raise ConfigError(f"{meta_file}: model {repository!r} has no catalog entry")
    device = device or _device(meta_file, meta, name) or fallback_device
    if device is None:
        named = (meta.get("hardware") or {}).get("device_name") if isinstance(meta.get("hardware"), dict) else None
        if named:
            raise ConfigError(f"{meta_file}: hardware.device_name: GPU {str(named)[:80]!r} has no catalog entry; "
                              "give a catalog GPU to replay on (--device)")
        raise ConfigError(f"{meta_file}: hardware.device_name: no GPU named; give the one the server ran on (--device)")
    kv = _section(meta, "kv_cache")
    knobs = {"max_num_seqs": engine.get("max_num_seqs"), "max_num_batched_tokens": engine.get("max_num_batched_tokens"),
             "max_model_len": engine.get("max_model_len"), "num_gpu_blocks": kv.get("num_gpu_blocks"),
             "block_size": kv.get("block_size"), "enable_prefix_caching": kv.get("enable_prefix_caching"),
             "async_scheduling": _async_scheduling(meta), "data_parallel_size": _data_parallel_size(meta_file, engine),
             "enable_expert_parallel": engine.get("enable_expert_parallel")}
    scenario = vllm_scenario(name, model, device, int(engine.get("tensor_parallel_size") or 1), knobs, seed)
    scenario["scheduler"]["api_server_s"] = API_SERVER_S
    ok = rows["ok"].to_numpy(bool)
    values = {metric: measured_figures(rows.loc[ok, metric].to_numpy(np.float64)) for metric in ("ttft", "e2e")}
    arrivals = rows["arrived_at"].to_numpy(np.float64)
    stage = MeasuredStage(WHOLE_RUN, 0.0, float(arrivals[-1]), float("nan"), len(rows), int((~ok).sum()), values)
    workload = Workload(arrived_at=arrivals, num_prefill_tokens=rows["num_prefill_tokens"].to_numpy(np.int64),
                        num_decode_tokens=rows["num_decode_tokens"].to_numpy(np.int64),
                        source=f"{name}/{requests_file}",
                        notes=("per-request log: the requests' own arrivals and lengths; no prefix sharing known "
                               "(the prompts' text is not logged)",))
    output_tokens = float(rows.loc[ok, "num_decode_tokens"].mean()) if ok.any() else float("nan")
    notes: tuple[str, ...] = ("TTFT and E2E from each request's arrival (wall clock mapped onto the engine's "
                              "monotonic clock by the smallest arrival-to-queue offset)",
                              "the engine's own times (vLLM's per-request stats): no API server in them, "
                              "so the replay adds none (api_server_s 0)")
    if kv.get("num_gpu_blocks") is None:
        notes += ("meta.json has no kv_cache.num_gpu_blocks: the KV-cache size is the simulator's estimate",)
    frame = rows.drop(columns="ok").reset_index(drop=True)
    return MeasuredRun(name, "request_log", scenario, workload, (stage,), output_tokens, frame, notes,
                       saturated=not ok.all())


def request_rows(file: str, raw: bytes) -> pd.DataFrame:
    """The requests of a `requests.jsonl`, sorted by arrival: `arrived_at` (seconds after the
    first arrival), `ttft`, `e2e` (seconds from arrival; NaN when the request never produced
    a token), `num_prefill_tokens`, `num_decode_tokens`, `ok`.

    Raises:
        ConfigError: a line is not a JSON object, a field is missing or not a number (names the
            line and field), or the file has no request.
    """
    records: list[list[float]] = []
    for line_number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        if len(records) >= MAX_REQUESTS:
            raise ConfigError(f"{file}: more than {MAX_REQUESTS:,} requests")
        records.append(_record(file, line_number, line))
    if not records:
        raise ConfigError(f"{file}: no requests")
    table = np.array(records, dtype=np.float64)   # columns: input, output, arrival, queued, first, last
    inputs, outputs, arrival, queued, first, last = table.T
    offset = np.min(queued - arrival)             # the clock offset (see the module's docstring)
    arrived_mono = arrival + offset
    ok = np.isfinite(first) & np.isfinite(last)
    frame = pd.DataFrame({"arrived_at": arrival - arrival.min(), "ttft": first - arrived_mono,
                          "e2e": last - arrived_mono, "num_prefill_tokens": inputs.astype(np.int64),
                          "num_decode_tokens": outputs.astype(np.int64), "ok": ok})
    return frame.sort_values("arrived_at", kind="stable").reset_index(drop=True)


def _record(file: str, line_number: int, line: str) -> list[float]:
    where = f"{file}: line {line_number}"
    row = json_object(where, line)
    values = [number(row, key, where, minimum=1) for key in ("input_toks", "output_toks")]
    values += [number(row, key, where) for key in ("arrival_time", "queued_ts")]
    # a request that never produced a token has no first/last token time (null): it failed
    values += [math.nan if row.get(key) is None else number(row, key, where)
               for key in ("first_token_ts", "last_token_ts")]
    if math.isfinite(values[4]) and not values[3] <= values[4] <= values[5]:
        raise ConfigError(f"{where}: expected queued_ts <= first_token_ts <= last_token_ts")
    return values


def _meta(file: str, raw: bytes) -> dict[str, Any]:
    return json_object(file, raw)


def _device(file: str, meta: dict[str, Any], name: str) -> str | None:
    """The catalog id of meta.json's hardware.device_name (or of the run's name when absent)."""
    hardware = _section(meta, "hardware")
    device_name = hardware.get("device_name")
    if device_name:
        device = device_of(str(device_name))
        if device is None:
            raise ConfigError(f"{file}: hardware.device_name {str(device_name)!r} has no catalog entry; "
                              "pick a catalog GPU to replay it on (--device)")
        return device
    return device_of(name)


def _data_parallel_size(file: str, engine: dict[str, Any]) -> int | None:
    """engine_kwargs.data_parallel_size: a whole number from 1 to 64 (the cluster's bound), or None.

    Raises:
        ConfigError: it is something else (names the file and field).
    """
    value = engine.get("data_parallel_size")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 64:
        raise ConfigError(f"{file}: engine_kwargs.data_parallel_size: expected a whole number from 1 to 64, "
                          f"got {str(value)[:40]!r}")
    return value


def _async_scheduling(meta: dict[str, Any]) -> bool | None:
    resolved = _section(meta, "resolved_config")
    scheduler = _section(resolved, "scheduler_config")
    value = scheduler.get("async_scheduling")
    return value if isinstance(value, bool) else None



def _section(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    """A nested mapping of meta.json, empty when absent or not a mapping."""
    value = mapping.get(key)
    return value if isinstance(value, dict) else {}
