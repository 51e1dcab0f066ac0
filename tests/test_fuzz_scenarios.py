"""Property: whatever a user writes into a scenario or a trace, the CLI ends with exit 0, or with
exit 2 and exactly one line on stderr; never exit 70 (an internal error)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import warnings
from pathlib import Path
from tempfile import TemporaryDirectory

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim_core.cli.main import main

BASE = {
    "seed": 1,
    "max_model_len": 2048,
    "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.0001},
    "scheduler": {"num_blocks": 200},
    "workload": {"num_requests": 20, "arrival": {"qps": 20.0},
                 "prompt_tokens": {"distribution": "uniform", "min": 8, "max": 256},
                 "output_tokens": {"distribution": "uniform", "min": 2, "max": 32}},
    "engine": {"record": "requests"},
}
TINY = 5e-324   # the smallest positive float: "greater than 0" allows it


def _floats(low: float, high: float) -> st.SearchStrategy:
    """Floats in [low, high], the ends and the smallest positive value drawn often."""
    ends = [v for v in (low, high, TINY, 1e-300, 1e-9, 1.0) if low <= v <= high]
    return st.one_of(st.sampled_from(ends), st.floats(low, high))


def _ints(low: int, high: int) -> st.SearchStrategy:
    return st.one_of(st.sampled_from([low, low + 1, high - 1, high]), st.integers(low, high))


# Valid values per field, extremes included; token counts and sizes stay small enough that a
# 50-request run is fast (a run budget, not validation, bounds those).
VALID = {
    "seed": _ints(0, 2**32 - 1), "max_model_len": _ints(2, 8192),
    "model": st.sampled_from(["llama-2-7b", "phi-2", "mixtral-8x7b", "llama-2-70b"]),
    "device": st.sampled_from(["a100-80gb", "h100-sxm", "a40", "rtx-4090"]), "name": st.text(max_size=300),
    "cluster.num_replicas": _ints(1, 1024), "cluster.tensor_parallel_size": st.sampled_from([1, 2, 8, 64]),
    "cluster.pipeline_parallel_size": st.sampled_from([1, 2, 4, 64]),
    "cluster.global_scheduler": st.sampled_from(["round_robin", "lor", "random"]),
    "scheduler.type": st.sampled_from(["vllm", "sarathi", "orca", "faster_transformer", "lightllm", "vllm_v0",
                                       "vllm_v1", "sglang"]),
    "scheduler.batch_size_cap": _ints(1, 65536), "scheduler.block_size": st.sampled_from([1, 2, 16, 4096]),
    "scheduler.watermark_blocks_fraction": _floats(0.0, 0.9), "scheduler.max_tokens_in_batch": _ints(1, 10**7),
    "scheduler.chunk_size": _ints(1, 10**7), "scheduler.max_num_seqs": _ints(0, 10**6),
    "scheduler.chunked_prefill_size": st.sampled_from([0, 16, 8192]),
    "scheduler.cuda_graph_batch_sizes": st.lists(_ints(1, 65536), max_size=4),
    "scheduler.enable_chunked_prefill": st.booleans(), "predictor.type": st.sampled_from(["linear", "roofline"]),
    "predictor.base_s": _floats(0.0, 1000.0), "predictor.per_token_s": _floats(0.0, 1000.0),
    "predictor.cpu_schedule_s": _floats(0.0, 10.0), "memory.margin_fraction": _floats(0.0, 0.9),
    "workload.arrival.process": st.sampled_from(["poisson", "gamma", "constant", "static", "bursty", "diurnal"]),
    "workload.arrival.qps": _floats(TINY, 1e6), "workload.arrival.cv": _floats(TINY, 100.0),
    "workload.arrival.rate_curve": st.lists(_floats(0.0, 1e6), max_size=20),
    "workload.arrival.on_s": _floats(TINY, 1e7), "workload.arrival.off_qps": _floats(0.0, 1e6),
    "workload.arrival.period_s": _floats(TINY, 1e8),
    "workload.prompt_tokens.distribution": st.sampled_from(["fixed", "uniform", "zipf", "lognormal"]),
    "workload.prompt_tokens.max": _ints(1, 4096), "workload.prompt_tokens.value": _ints(1, 4096),
    "workload.prompt_tokens.sigma": _floats(TINY, 5.0), "workload.output_tokens.max": _ints(1, 1024),
    "workload.output_tokens.mean": _floats(TINY, 1e7), "workload.sessions.enabled": st.booleans(),
    "workload.sessions.max_turns": _ints(1, 10_000), "workload.sessions.think_time_s": _floats(0.0, 1e6),
    "workload.sessions.closed_loop": st.booleans(), "workload.time_scale_factor": _floats(TINY, 1e6),
    "workload.prefill_scale_factor": _floats(TINY, 1e6), "workload.decode_scale_factor": _floats(TINY, 1e6),
    "workload.parallel_samples": _ints(1, 256), "workload.shared_prefix.tokens": _ints(0, 10**6),
    "disaggregation.enabled": st.booleans(), "disaggregation.link_bandwidth_gb_s": _floats(TINY, 1e5),
    "disaggregation.link_latency_s": _floats(0.0, 100.0), "engine.fast_forward": st.booleans(),
    # read only when the scenario replays TRACE
    "workload.target_qps": _floats(TINY, 1e6), "workload.window_start_s": _floats(0.0, 1e9),
    "workload.window_end_s": _floats(TINY, 1e9), "workload.sample_fraction": _floats(TINY, 1.0),
    "workload.max_trace_requests": _ints(0, 100), "workload.on_bad_rows": st.sampled_from(["error", "skip"]),
    "workload.trace_format": st.sampled_from(["auto", "canonical", "vidur", "vidur_lengths", "azure", "mooncake"]),
}
TRACE = "arrived_at,num_prefill_tokens,num_decode_tokens,session_id,turn\n" + "".join(
    f"{t * 0.37 % 5:.3f},{1 + t * 97 % 900},{1 + t * 31 % 60},{t % 4},{t // 4}\n" for t in range(24))
# Whole sections and catalog entries only get hostile values. Sizes that only a run budget
# bounds (num_requests, num_blocks) are fuzzed separately, without large valid values.
FIELDS = [*VALID, "devices", "models", "workload", "scheduler"]
SMALL_SIZES = {"workload.num_requests": 50, "scheduler.num_blocks": 400}

EXTREMES = st.sampled_from([
    0, 1, -1, 2, 7, 16, 1000, 2**31, 2**53, 2**63, -2**63, 10**20, 10**400, 0.0, -0.0, 0.5, 1.5, 1e-300, 5e-324,
    1e300, -1e300, math.nan, math.inf, -math.inf, True, False, None, "", "42", "1e3", "nan", "true", "x" * 300,
    "vllm", "sglang", "sarathi", "lightllm", "orca", "vllm_v0", "diurnal", "bursty", "gamma", "replay", "fixed",
    "lognormal", "zipf", "empirical", "roofline", [], [1, 2], [0.0], [math.nan], [1e-320], [-1.0, 2.0], {},
    {"a": 1}, [[[]]], {"slow": {"name": "s", "bf16_tflops": 1e-300, "memory_gib": 1, "memory_bandwidth_gbps": 1,
                                "link_bandwidth_gbps": 1}},
])
HOSTILE = st.one_of(EXTREMES, st.integers(), st.floats(), st.text(max_size=12),
                    st.lists(st.one_of(st.floats(), st.integers()), max_size=4),
                    st.recursive(st.none() | st.booleans() | st.integers(-3, 3),
                                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                             max_size=3), max_leaves=8))


def set_path(data: dict, path: str, value) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        data = data.setdefault(part, {}) if isinstance(data.get(part, {}), dict) else {}
    data[leaf] = value


@st.composite
def scenarios(draw) -> dict:
    data = copy.deepcopy(BASE)
    if draw(st.booleans()):
        data["workload"]["trace_file"] = "t.csv"   # TRACE, written next to the scenario
    for path in draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=4, unique=True)):
        valid = path in VALID and draw(st.integers(0, 3)) > 0   # mostly valid extremes, else anything
        set_path(data, path, draw(VALID[path] if valid else HOSTILE))
    for path, most in SMALL_SIZES.items():
        if draw(st.booleans()):
            small = draw(st.integers(0, 3)) > 0
            if small:
                strategy = _ints(1, most)
            else:
                strategy = EXTREMES.filter(lambda v, most=most: not (type(v) is int and v > most))
            set_path(data, path, draw(strategy))
    return data


def cli(*args: str) -> tuple[int, str]:
    """(exit status, stderr) of an in-process CLI call; warnings count as stderr lines."""
    err = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(err), \
            contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("always")
        code = main(list(args))
    return code, err.getvalue() + "".join(f"warning: {w.message}\n" for w in caught)


def assert_clean_exit(code: int, err: str, what: str) -> None:
    assert code in (0, 2), f"exit {code} for {what}: {err}"
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("error: "), f"{what}: {err!r}"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(["yaml", "json"]))
def test_any_scenario_exits_0_or_2_with_one_line(data, suffix):
    """A scenario with extreme, mistyped, non-finite or nested values runs or is refused in one line."""
    text = yaml.safe_dump(data) if suffix == "yaml" else json.dumps(data)
    with TemporaryDirectory() as folder:
        path = Path(folder) / f"s.{suffix}"
        path.write_text(text)
        (Path(folder) / "t.csv").write_text(TRACE)
        assert_clean_exit(*cli("run", "--config", str(path)), text[:2000])


CELLS = st.one_of(
    st.sampled_from(["0", "1", "5", "100", "", "nan", "inf", "-1", "1.5", "1e300", "1e15", "-0", "abc", "1e9",
                     "9223372036854775808", "9" * 400, "2023-11-16 18:15:46.6805900", "9999-12-31", "1677-01-01",
                     "2262-04-11 23:00:00", '"1,2"', "1 2 3", "-5 7", "ChatGPT", "Conversation log"]),
    st.integers(-10, 10**20).map(str), st.floats(allow_nan=True).map(repr),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n\x00"), max_size=8))
NUMBER = st.one_of(_ints(0, 10**9), _floats(0.0, 1e9)).map(repr)
STAMP = st.datetimes().map(lambda t: t.isoformat(sep=" "))
VALID_CELLS = {   # header -> a valid value per column
    "arrived_at,num_prefill_tokens,num_decode_tokens": [NUMBER] * 3,
    "arrived_at,num_prefill_tokens,num_decode_tokens,priority,session_id,turn,prefix_group,prefix_len,n,hash_ids":
        [NUMBER, *[_ints(0, 10**9).map(str)] * 8, st.lists(_ints(0, 2**63 - 1), max_size=3).map(
            lambda ids: " ".join(map(str, ids)))],
    "num_prefill_tokens,num_decode_tokens": [NUMBER] * 2,
    "TIMESTAMP,ContextTokens,GeneratedTokens": [STAMP, NUMBER, NUMBER],
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type":
        [NUMBER, st.sampled_from(["ChatGPT", "GPT-4"]), NUMBER, NUMBER, NUMBER, st.just("Conversation log")],
}


@st.composite
def csv_traces(draw) -> str:
    header = draw(st.sampled_from(sorted(VALID_CELLS)))
    rows = []
    for _ in range(draw(st.integers(1, 5))):   # mostly valid rows, else any cells
        cells = VALID_CELLS[header] if draw(st.integers(0, 3)) else [CELLS] * len(VALID_CELLS[header])
        rows.append(",".join(draw(cell) for cell in cells))
    return "\n".join([header, *rows]) + "\n"


JSON_VALUES = st.one_of(HOSTILE.filter(lambda v: not isinstance(v, float) or math.isfinite(v)),
                        st.sampled_from([0, 5, 1000, 10**30, 1e300, -1, [1, 2], [2**64], [-1]]))


VALID_RECORD = st.fixed_dictionaries(
    {"timestamp": st.one_of(_ints(0, 10**12), _floats(0.0, 1e12)), "input_length": _ints(0, 10**9),
     "output_length": _ints(0, 10**9)}, optional={"hash_ids": st.lists(_ints(0, 2**63 - 1), max_size=3)})
GARBAGE = ["{", "[1]", '{"timestamp": ' + "9" * 5000 + "}", "{" * 3000, '{"a": NaN}', "null", '{"timestamp": 1e999}']


@st.composite
def mooncake_traces(draw) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 4))):   # mostly valid records, else any values, rarely not JSON
        kind = draw(st.integers(0, 9))
        if kind == 9:
            lines.append(draw(st.sampled_from(GARBAGE)))
            continue
        record = draw(VALID_RECORD) if kind > 2 else {
            key: draw(JSON_VALUES) for key in ("timestamp", "input_length", "output_length", "hash_ids")
            if draw(st.integers(0, 5))}
        lines.append(json.dumps(record))
    return "\n".join(lines) + "\n"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(csv_traces().map(lambda t: ("t.csv", t)), mooncake_traces().map(lambda t: ("t.jsonl", t))),
       st.booleans())
def test_any_trace_validates_or_is_refused_in_one_line(trace, skip):
    """Trace rows with extreme, mistyped or malformed values are read, or refused naming the row."""
    name, text = trace
    with TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(text, encoding="utf-8")
        args = ["validate", *(["--skip-bad-rows"] if skip else []), str(path)]
        assert_clean_exit(*cli(*args), text[:2000])
