"""Reader for the result JSON of vLLM's own benchmark client (`vllm bench serve --save-result`,
earlier `benchmarks/benchmark_serving.py`).

What the file holds (vLLM's `benchmarks/serve.py`): the run's setup (`model_id`, `num_prompts`,
`request_rate` (a number or "inf"), `burstiness`, `max_concurrency`, optional ramp-up and any
`--metadata KEY=VALUE` pairs at the top level), the summary (`completed`, `failed`,
`total_input_tokens`, `total_output_tokens`, `mean_/median_/std_/pNN_{ttft,tpot,itl,e2el}_ms`)
and, with `--save-detailed`, one entry per request in send order: `input_lens`, `output_lens`,
`ttfts`, `itls` (a list per request), `errors` ("" when it succeeded) and, in recent versions (0.33),
`start_times` and `latencies`.

The rebuilt client load: the client sends request i at the cumulative sum of gaps drawn from
a gamma distribution of shape `burstiness` and scale 1 / (rate x burstiness) (Poisson at
burstiness 1), then rescales the sums so the last send is at num_prompts / rate; at an
infinite rate everything is sent at t = 0. Its random state is not saved, so the rebuild draws
the gaps seeded by the scenario's seed; when the file has `start_times` (the actual send times)
those are used instead. The file names no GPU: the user gives it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from sim_core.accuracy.json_files import json_object
from sim_core.accuracy.measured import WHOLE_RUN, MeasuredRun, MeasuredStage, latency_figures
from sim_core.accuracy.server import device_of, model_of, vllm_scenario
from sim_core.errors import ConfigError
from sim_core.workload.model import Workload

REQUIRED = ("model_id", "num_prompts", "request_rate")
# our metric -> vLLM's metric name in `mean_<name>_ms`, `median_<name>_ms`, `p90_<name>_ms`, ...
METRIC_NAMES = {"ttft": "ttft", "e2e": "e2el"}
SUMMARY_STATS = {"mean": "mean", "p50": "median", "p90": "p90", "p99": "p99"}
KNOBS = ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "block_size", "num_gpu_blocks",
         "enable_prefix_caching", "data_parallel_size", "enable_expert_parallel")
MAX_REQUESTS = 10_000_000


def is_vllm_bench(names: set[str]) -> bool:
    """Whether the files could be one `vllm bench serve` result: a single `.json` file at the top
    of the run (the reader checks its fields) that is not a model's Hugging Face `config.json`."""
    if len(names) != 1:
        return False
    name = next(iter(names)).lower()
    return name.endswith(".json") and "/" not in name and name != "config.json"


def read_vllm_bench(name: str, files: Mapping[str, bytes], device: str | None = None, seed: int = 42,
                    fallback_device: str | None = None) -> MeasuredRun:
    """The run in the one result JSON of `files`. `device` (a catalog id) overrides any GPU
    named in the file's metadata (`hardware`, `device`, `gpu`) or the run's name;
    `fallback_device` is used when neither names one.

    Raises:
        ConfigError: the file is not a result JSON, a field is malformed, or the model or GPU
            is unknown (the message names the file and field).
    """
    file = next(iter(files))
    data = _result(file, files[file])
    repository = str(data["model_id"])
    model = model_of(repository)
    if model is None:
        raise ConfigError(f"{file}: model_id {repository!r} has no catalog entry")
    hints = [str(data.get(key, "")) for key in ("hardware", "device", "gpu")]
    device = device or device_of(*hints, name) or fallback_device
    if device is None:
        raise ConfigError(f"{file}: the result names no GPU; give the one the server ran on (--device)")
    requests = _detailed(file, data, seed)
    notes = _notes(data, requests is not None)
    workload_source = f"{name}/{file}"
    if requests is not None:
        workload, output_tokens = _detailed_workload(requests, workload_source), _mean_output(requests)
        values = {metric: measured_figures(requests.loc[requests["ok"], metric].to_numpy(np.float64))
                  for metric in METRIC_NAMES}
        num_requests, num_failed = len(requests), int((~requests["ok"]).sum())
        frame: pd.DataFrame | None = requests.drop(columns="ok").reset_index(drop=True)
    else:
        workload, output_tokens = _summary_workload(file, data, seed, workload_source)
        values = _summary_values(file, data)
        num_requests, num_failed = len(workload), int(_count(data, "failed", file, 0))
        notes += (f"no per-request data (run without --save-detailed): every request has the mean lengths, "
                  f"{int(workload.num_prefill_tokens[0])} prompt and {int(workload.num_decode_tokens[0])} "
                  "output tokens",)
        frame = None
    duration = _float(data, "duration", file, float(workload.arrived_at[-1]) if len(workload) else 0.0)
    rate = _rate(data, file)
    stage = MeasuredStage(WHOLE_RUN, 0.0, max(duration, float(workload.arrived_at[-1])) if len(workload) else duration,
                          rate if math.isfinite(rate) else float("nan"), num_requests, num_failed, values)
    knobs = {key: _knob(data, key, file) for key in KNOBS}
    tp = int(_knob(data, "tensor_parallel_size", file) or 1)
    scenario = vllm_scenario(name, model, device, tp, knobs, seed)
    return MeasuredRun(name, "vllm_bench", scenario, workload, (stage,), output_tokens, frame, notes,
                       saturated=num_failed > 0)


def _result(file: str, raw: bytes) -> dict[str, Any]:
    data = json_object(file, raw, "a JSON object (a vllm bench serve result)")
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise ConfigError(f"{file}: not a vllm bench serve result: missing field {missing[0]!r}")
    if not isinstance(data["model_id"], str) or not data["model_id"].strip():
        raise ConfigError(f"{file}: model_id: expected the served model's name, got {data['model_id']!r}")
    return data


def _rate(data: dict[str, Any], file: str) -> float:
    """The request rate: a positive number, or inf ("inf" in the file)."""
    value = data["request_rate"]
    rate = math.inf if value in ("inf", "Infinity") else value
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
        raise ConfigError(f"{file}: request_rate: expected a positive number or \"inf\", got {value!r}")
    return float(rate)


def _burstiness(data: dict[str, Any], file: str) -> float:
    value = data.get("burstiness", 1.0)
    value = math.inf if value in ("inf", "Infinity") else value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{file}: burstiness: expected a positive number, got {value!r}")
    return float(value)


def send_times(num_requests: int, rate: float, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    """The client's send times (seconds) of `num_requests` requests, as `vllm bench serve`
    draws them: gamma gaps of shape `burstiness` and mean 1 / rate, summed, then scaled so the
    last send is at num_requests / rate (the first send is one gap after t = 0, not at 0).
    inf rate: all at 0; inf burstiness: evenly spaced at 1 / rate."""
    if num_requests == 0 or math.isinf(rate):
        return np.zeros(num_requests)
    if math.isinf(burstiness):
        gaps = np.full(num_requests, 1.0 / rate)
    else:
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=num_requests)
    sends = np.cumsum(gaps)
    return sends * ((num_requests / rate) / sends[-1]) if sends[-1] > 0 else sends


def _detailed(file: str, data: dict[str, Any], seed: int) -> pd.DataFrame | None:
    """The per-request frame (send order) when the file was saved with --save-detailed:
    `arrived_at`, `ttft`, `e2e` (NaN for failed requests), `num_prefill_tokens`,
    `num_decode_tokens` and `ok`; rows sorted by send time."""
    if not all(isinstance(data.get(key), list) for key in ("input_lens", "output_lens", "ttfts")):
        return None
    inputs, outputs, ttfts = data["input_lens"], data["output_lens"], data["ttfts"]
    n = len(inputs)
    if not 0 < n <= MAX_REQUESTS:
        raise ConfigError(f"{file}: input_lens: expected 1 to {MAX_REQUESTS:,} requests, got {n}")
    for key, values in (("output_lens", outputs), ("ttfts", ttfts)):
        if len(values) != n:
            raise ConfigError(f"{file}: {key}: {len(values)} entries where input_lens has {n}")
    errors = data.get("errors") if isinstance(data.get("errors"), list) and len(data["errors"]) == n else None
    ok = np.array([_succeeded(i, errors, outputs) for i in range(n)], dtype=bool)
    ttft = np.array([_entry(ttfts, i, "ttfts", file) for i in range(n)])
    e2e = _latencies(file, data, ttft, n)
    frame = pd.DataFrame({
        "arrived_at": _arrivals(file, data, n, seed),
        "ttft": np.where(ok, ttft, np.nan), "e2e": np.where(ok, e2e, np.nan),
        "num_prefill_tokens": [int(_entry(inputs, i, "input_lens", file)) for i in range(n)],
        "num_decode_tokens": [int(_entry(outputs, i, "output_lens", file)) for i in range(n)],
        "ok": ok})
    return frame.sort_values("arrived_at", kind="stable")


def _succeeded(index: int, errors: list | None, outputs: list) -> bool:
    """vLLM saves no success flag: a request failed when its error text is not empty (or, in
    files without errors, when it got no output token)."""
    if errors is not None:
        return not errors[index]
    return isinstance(outputs[index], (int, float)) and outputs[index] > 0


def _latencies(file: str, data: dict[str, Any], ttft: np.ndarray, n: int) -> np.ndarray:
    """E2E per request: `latencies` when saved, else TTFT + the sum of the inter-token gaps
    (how vLLM itself rebuilds a request's latency)."""
    if isinstance(data.get("latencies"), list) and len(data["latencies"]) == n:
        return np.array([_entry(data["latencies"], i, "latencies", file) for i in range(n)])
    itls = data.get("itls")
    if not isinstance(itls, list) or len(itls) != n:
        raise ConfigError(f"{file}: itls: expected one list of inter-token gaps per request (or latencies)")
    out = np.empty(n)
    for i, gaps in enumerate(itls):
        if not isinstance(gaps, list):
            raise ConfigError(f"{file}: itls[{i}]: expected a list of seconds, got {gaps!r}")
        out[i] = ttft[i] + sum(_entry(gaps, j, f"itls[{i}]", file) for j in range(len(gaps)))
    return out


def _arrivals(file: str, data: dict[str, Any], n: int, seed: int) -> np.ndarray:
    starts = data.get("start_times")
    if isinstance(starts, list) and len(starts) == n and n:
        times = np.array([_entry(starts, i, "start_times", file) for i in range(n)])
        return times - times.min()
    return send_times(n, _rate(data, file), _burstiness(data, file), np.random.default_rng(seed))


def _detailed_workload(requests: pd.DataFrame, source: str) -> Workload:
    outputs = requests["num_decode_tokens"].to_numpy(np.int64)
    ok = requests["ok"].to_numpy(bool)
    fill = int(round(np.median(outputs[ok]))) if ok.any() else 1
    decode = np.where(ok & (outputs >= 1), outputs, max(fill, 1))   # failed requests: the median length
    return Workload(arrived_at=requests["arrived_at"].to_numpy(np.float64),
                    num_prefill_tokens=np.maximum(requests["num_prefill_tokens"].to_numpy(np.int64), 1),
                    num_decode_tokens=decode.astype(np.int64), source=source,
                    notes=("vllm bench serve: the requests' own prompt and output lengths",))


def _mean_output(requests: pd.DataFrame) -> float:
    ok = requests[requests["ok"]]
    return float(ok["num_decode_tokens"].mean()) if len(ok) else float("nan")


def _summary_workload(file: str, data: dict[str, Any], seed: int, source: str) -> tuple[Workload, float]:
    completed = _count(data, "completed", file)
    if completed < 1:
        raise ConfigError(f"{file}: completed: no request completed, so no lengths to rebuild")
    n = int(_count(data, "num_prompts", file))
    if not 0 < n <= MAX_REQUESTS:
        raise ConfigError(f"{file}: num_prompts: expected 1 to {MAX_REQUESTS:,}, got {n}")
    prompt = max(int(round(_count(data, "total_input_tokens", file) / completed)), 1)
    output = _count(data, "total_output_tokens", file) / completed
    arrivals = send_times(n, _rate(data, file), _burstiness(data, file), np.random.default_rng(seed))
    workload = Workload(arrived_at=arrivals, num_prefill_tokens=np.full(n, prompt, dtype=np.int64),
                        num_decode_tokens=np.full(n, max(int(round(output)), 1), dtype=np.int64), source=source,
                        notes=("vllm bench serve: mean prompt and output lengths from the totals",))
    return workload, float(output)


def _summary_values(file: str, data: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The summary's figures in seconds, only the statistics the file has."""
    values: dict[str, dict[str, float]] = {}
    for metric, vllm_name in METRIC_NAMES.items():
        stats = {stat: _float(data, f"{prefix}_{vllm_name}_ms", file, math.nan) / 1000
                 for stat, prefix in SUMMARY_STATS.items()}
        stats = {stat: value for stat, value in stats.items() if math.isfinite(value)}
        if stats:
            values[metric] = stats
    if not values:
        raise ConfigError(f"{file}: no latency figures (mean_ttft_ms, mean_e2el_ms, ...) and no per-request data")
    return values


def measured_figures(values: np.ndarray) -> dict[str, float]:
    """Mean and p50/p90/p99 of measured latencies; empty when no request succeeded (nothing was
    measured)."""
    return latency_figures(values) if len(values) else {}


def _notes(data: dict[str, Any], detailed: bool) -> tuple[str, ...]:
    notes = []
    if isinstance(data.get("start_times"), list) and detailed:
        notes.append("send times: the client's recorded start_times")
    else:
        notes.append(f"send times rebuilt as the client draws them (request_rate {data.get('request_rate')}, "
                     f"burstiness {data.get('burstiness', 1.0)}), seeded: the client's own draw was not saved")
    if data.get("max_concurrency"):
        notes.append(f"max_concurrency {data['max_concurrency']}: the client's cap on requests in flight is not "
                     "modelled (the replay sends at the drawn times)")
    if data.get("ramp_up_strategy"):
        notes.append(f"ramp_up_strategy {data['ramp_up_strategy']}: not modelled (sent at the constant rate)")
    if not any(data.get(key) is not None for key in KNOBS):
        notes.append("server knobs not in the file (give them with --metadata KEY=VALUE): vLLM's defaults assumed")
    return tuple(notes)


def _entry(values: list, index: int, key: str, file: str) -> float:
    value = values[index]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{file}: {key}[{index}]: expected a non-negative number, got {value!r}")
    return float(value)


def _float(data: dict[str, Any], key: str, file: str, default: float) -> float:
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{file}: {key}: expected a number, got {value!r}")
    return float(value)


def _count(data: dict[str, Any], key: str, file: str, default: float | None = None) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{file}: {key}: expected a non-negative number, got {value!r}")
    return float(value)


def _knob(data: dict[str, Any], key: str, file: str) -> Any:
    """A server knob given as `--metadata KEY=VALUE` (saved as text) or a number; None if absent."""
    value = data.get(key)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return text == "true"
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{file}: {key}: expected a whole number or true/false, got {value!r}") from None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return int(value)
    raise ConfigError(f"{file}: {key}: expected a whole number, got {value!r}")
