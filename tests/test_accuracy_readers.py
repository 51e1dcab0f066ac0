"""Measured-run readers for `vllm bench serve` result JSON and per-request logs (requests.jsonl +
meta.json): small synthetic files written here, exact figures computed by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim_core.accuracy.layouts import ReadOptions, read_files, read_folder
from sim_core.accuracy.measured import WHOLE_RUN
from sim_core.accuracy.replay import scenario_config
from sim_core.accuracy.vllm_bench import send_times
from sim_core.errors import ConfigError

H100 = ReadOptions(fallback_device="h100-sxm")


def bench(**fields) -> dict[str, bytes]:
    """A `vllm bench serve` result of three requests at an infinite rate, saved with
    --save-detailed (no start_times, as older versions wrote it), with `fields` replaced."""
    result = {"date": "20260101-000000", "backend": "vllm", "model_id": "meta-llama/Llama-2-7b-hf",
              "tokenizer_id": "meta-llama/Llama-2-7b-hf", "num_prompts": 3, "request_rate": "inf",
              "burstiness": 1.0, "max_concurrency": None, "duration": 1.5, "completed": 3, "failed": 0,
              "total_input_tokens": 600, "total_output_tokens": 9, "mean_ttft_ms": 300.0,
              "input_lens": [100, 200, 300], "output_lens": [3, 2, 4], "ttfts": [0.1, 0.2, 0.6],
              "itls": [[0.05, 0.05], [0.1], [0.2, 0.2, 0.2]], "errors": ["", "", ""]}
    result.update(fields)
    return {"result.json": json.dumps(result).encode()}


def test_a_detailed_vllm_bench_result_gives_exact_whole_run_figures():
    """TTFTs 0.1, 0.2, 0.6 s and E2E = TTFT + the gaps: 0.2, 0.3, 1.2 s. Means 0.3 and 1.7/3 s;
    numpy's linear p90 sits 0.8 of the way from the 2nd to the 3rd value (0.2 + 0.8 x 0.4 =
    0.52; 0.3 + 0.8 x 0.9 = 1.02), p99 0.98 of the way (0.592; 1.182). An infinite rate sends
    everything at t = 0; the divisor of itl is the mean output, (3 + 2 + 4) / 3 = 3."""
    [run] = read_files("bench", bench(), H100)
    stage = run.stage(WHOLE_RUN)
    assert run.layout == "vllm_bench" and [s.index for s in run.stages] == [WHOLE_RUN]
    assert stage.values["ttft"] == pytest.approx({"mean": 0.3, "p50": 0.2, "p90": 0.52, "p99": 0.592})
    assert stage.values["e2e"] == pytest.approx({"mean": 1.7 / 3, "p50": 0.3, "p90": 1.02, "p99": 1.182})
    assert (stage.num_requests, stage.num_failed, run.saturated) == (3, 0, False)
    assert run.output_tokens == 3.0
    assert run.workload.arrived_at.tolist() == [0.0, 0.0, 0.0]
    assert run.workload.num_prefill_tokens.tolist() == [100, 200, 300]
    assert run.workload.num_decode_tokens.tolist() == [3, 2, 4]
    assert run.requests["e2e"].tolist() == pytest.approx([0.2, 0.3, 1.2])
    assert (run.scenario["model"], run.scenario["device"]) == ("llama-2-7b", "h100-sxm")


def test_a_failed_request_is_left_out_of_the_figures_and_marks_the_run_saturated():
    """A 4th request failed ("timeout", no token): the figures stay those of the three others;
    the replay still sends it, with the median answered output length (3 tokens)."""
    [run] = read_files("bench", bench(num_prompts=4, input_lens=[100, 200, 300, 50], output_lens=[3, 2, 4, 0],
                                      ttfts=[0.1, 0.2, 0.6, 0.0], itls=[[0.05, 0.05], [0.1], [0.2, 0.2, 0.2], []],
                                      errors=["", "", "", "timeout"]), H100)
    stage = run.stage(WHOLE_RUN)
    assert stage.values["ttft"]["mean"] == pytest.approx(0.3)
    assert (stage.num_requests, stage.num_failed, run.saturated) == (4, 1, True)
    assert run.workload.num_decode_tokens.tolist() == [3, 2, 4, 3]
    assert np.isnan(run.requests["ttft"].iloc[3])


def test_recorded_start_times_become_the_send_times():
    """Recent vLLM (0.33) saves each request's start (perf_counter) and latency: sends at 100, 100.5 and
    101.25 s become 0, 0.5 and 1.25 s; `latencies` is the E2E as saved."""
    [run] = read_files("bench", bench(start_times=[100.0, 100.5, 101.25], latencies=[0.25, 0.35, 1.25]), H100)
    assert run.workload.arrived_at.tolist() == [0.0, 0.5, 1.25]
    assert run.stage(WHOLE_RUN).values["e2e"]["mean"] == pytest.approx(0.6166666)
    assert "start_times" in run.notes[0]


def test_the_client_send_times_are_rebuilt_as_vllm_bench_draws_them():
    """burstiness inf: gaps of exactly 1/rate, summed (0.5, 1, 1.5, 2 s at 2 req/s; the first send
    one gap after 0) and scaled so the last is at n / rate = 2 s (factor 1). Poisson at 4 req/s:
    10 sends whose last is at 10 / 4 = 2.5 s, the same for the same seed."""
    assert send_times(4, 2.0, float("inf"), np.random.default_rng(0)).tolist() == [0.5, 1.0, 1.5, 2.0]
    poisson = send_times(10, 4.0, 1.0, np.random.default_rng(3))
    assert poisson[-1] == pytest.approx(2.5) and np.all(np.diff(poisson) > 0) and poisson[0] > 0
    assert poisson.tolist() == send_times(10, 4.0, 1.0, np.random.default_rng(3)).tolist()
    assert send_times(3, float("inf"), 1.0, np.random.default_rng(0)).tolist() == [0.0, 0.0, 0.0]


def test_a_summary_only_result_replays_mean_lengths_at_the_rebuilt_rate():
    """Without --save-detailed: 4 prompts, 1000 input and 400 output tokens over 4 completed
    requests give 250 and 100 tokens each; 2 req/s with burstiness inf sends at 0.5, 1, 1.5, 2 s;
    the figures are the summary's, ms to s, only those present (no p90)."""
    result = {"model_id": "meta-llama/Llama-2-7b-hf", "num_prompts": 4, "request_rate": 2.0, "burstiness": "inf",
              "completed": 4, "total_input_tokens": 1000, "total_output_tokens": 400, "max_concurrency": 8,
              "mean_ttft_ms": 120.0, "median_ttft_ms": 100.0, "p99_ttft_ms": 300.0, "mean_e2el_ms": 2000.0}
    [run] = read_files("summary", {"result.json": json.dumps(result).encode()}, H100)
    assert run.workload.arrived_at.tolist() == [0.5, 1.0, 1.5, 2.0]
    assert run.workload.num_prefill_tokens.tolist() == [250] * 4
    assert run.workload.num_decode_tokens.tolist() == [100] * 4
    values = run.stage(WHOLE_RUN).values
    assert set(values) == {"ttft", "e2e"}
    assert values["ttft"] == pytest.approx({"mean": 0.12, "p50": 0.1, "p99": 0.3})
    assert values["e2e"] == pytest.approx({"mean": 2.0})
    assert run.requests is None and run.output_tokens == 100.0
    assert any("max_concurrency 8" in note for note in run.notes)


def test_server_knobs_given_as_metadata_reach_the_scenario():
    """`--metadata max_num_seqs=64 tensor_parallel_size=2` is saved as text at the top level."""
    [run] = read_files("bench", bench(max_num_seqs="64", tensor_parallel_size="2"), H100)
    assert run.scenario["scheduler"]["max_num_seqs"] == 64
    assert run.scenario["cluster"]["tensor_parallel_size"] == 2


@pytest.mark.parametrize("device,tokens,seqs", [("h100-sxm", 8192, 1024), ("a100-80gb", 2048, 256),
                                                  ("l40s", 2048, 256)])
def test_knobs_a_run_leaves_unset_are_the_api_servers_defaults_for_its_gpu(device, tokens, seqs):
    """vLLM's API server budgets 8192 tokens and 1024 requests a step on a GPU of at least
    70 GiB that is not an A100 (H100: 79.18 GiB), else 2048 and 256 (A100 80GB, excluded by name;
    L40S, 44.42 GiB)."""
    [run] = read_files("bench", bench(), ReadOptions(fallback_device=device))
    scheduler = run.scenario["scheduler"]
    assert (scheduler["max_num_batched_tokens"], scheduler["max_num_seqs"]) == (tokens, seqs)


def test_data_parallel_metadata_of_a_dense_model_gives_replicas():
    """`--metadata data_parallel_size=2 enable_expert_parallel=true` on Llama-2-7B (dense): two
    independent engine cores, i.e. two replicas routed to the least loaded."""
    [run] = read_files("bench", bench(data_parallel_size="2", enable_expert_parallel="true"), H100)
    assert (run.scenario["cluster"]["num_replicas"], run.scenario["cluster"]["global_scheduler"]) == \
        (2, "least_outstanding")
    assert "data_parallel_size" not in run.scenario["cluster"]


@pytest.mark.parametrize("fields,options,message", [
    ({"model_id": None}, H100, "result.json: model_id: expected the served model's name, got None"),
    ({"ttfts": [0.1, "x", 0.6]}, H100, "result.json: ttfts[1]: expected a non-negative number, got 'x'"),
    ({"output_lens": [3, 2]}, H100, "result.json: output_lens: 2 entries where input_lens has 3"),
    ({"request_rate": -1}, H100, "result.json: request_rate: expected a positive number"),
    ({"model_id": "google/gemma-2-9b-it"}, H100, "result.json: model_id 'google/gemma-2-9b-it' has no catalog entry"),
    ({}, ReadOptions(), "result.json: the result names no GPU; give the one the server ran on (--device)"),
])
def test_a_bad_vllm_bench_result_is_named_by_file_and_field(fields, options, message):
    with pytest.raises(ConfigError) as error:
        read_files("bench", bench(**fields), options)
    assert str(error.value).startswith(message)


def test_a_single_json_that_is_not_a_bench_result_says_so():
    with pytest.raises(ConfigError, match=r"^notes\.json: not a vllm bench serve result: missing field 'model_id'"):
        read_files("x", {"notes.json": b'{"hello": 1}'}, H100)


# ---- per-request logs --------------------------------------------------------------------------

META = {"model": "meta-llama/Llama-3.1-8B", "vllm_version": "0.19.0",
        "engine_kwargs": {"model": "meta-llama/Llama-3.1-8B", "tensor_parallel_size": 1, "max_num_seqs": 128,
                          "max_num_batched_tokens": 2048, "max_model_len": 8192},
        "kv_cache": {"num_gpu_blocks": 500, "block_size": 16, "enable_prefix_caching": True},
        "hardware": {"device_name": "NVIDIA GeForce RTX 4090"}}
# arrivals 1000, 1000.5, 1001, 1002 s (wall clock); the engine clock is 950 s behind, and request
# 1 reached the queue 0.1 s late, request 3 0.2 s late; listed out of arrival order
ROWS = [
    {"request_id": "r2", "input_toks": 300, "output_toks": 30, "arrival_time": 1001.0, "queued_ts": 51.0,
     "scheduled_ts": 51.0, "first_token_ts": 51.2, "last_token_ts": 52.0},
    {"request_id": "r0", "input_toks": 100, "output_toks": 10, "arrival_time": 1000.0, "queued_ts": 50.0,
     "scheduled_ts": 50.0, "first_token_ts": 50.3, "last_token_ts": 51.0},
    {"request_id": "r1", "input_toks": 200, "output_toks": 20, "arrival_time": 1000.5, "queued_ts": 50.6,
     "scheduled_ts": 50.6, "first_token_ts": 50.9, "last_token_ts": 51.7},
    {"request_id": "r3", "input_toks": 400, "output_toks": 40, "arrival_time": 1002.0, "queued_ts": 52.2,
     "scheduled_ts": 52.2, "first_token_ts": 52.6, "last_token_ts": 53.5},
]


def log_files(rows=ROWS, meta=META, folder="") -> dict[str, bytes]:
    return {f"{folder}requests.jsonl": "\n".join(json.dumps(row) for row in rows).encode(),
            f"{folder}meta.json": json.dumps(meta).encode()}


def test_a_request_log_measures_from_each_arrival_on_the_engine_clock():
    """The smallest queued - arrival is -950 s (the clock offset), so arrivals sit at 50, 50.5, 51
    and 52 s on the engine clock. TTFT = first token - arrival: 0.3, 0.4 (0.3 after queueing
    plus the 0.1 s it took to get there), 0.2, 0.6, mean 0.375; E2E 1.0, 1.2, 1.0, 1.5, mean
    1.175. Sends at 0, 0.5, 1, 2 s with the logged lengths; the itl divisor is the mean output 25."""
    [run] = read_files("log", log_files(), ReadOptions())
    stage = run.stage(WHOLE_RUN)
    assert run.layout == "request_log"
    assert run.requests["ttft"].tolist() == pytest.approx([0.3, 0.4, 0.2, 0.6])
    assert stage.values["ttft"]["mean"] == pytest.approx(0.375)
    assert stage.values["e2e"]["mean"] == pytest.approx(1.175)
    assert stage.values["e2e"]["p50"] == pytest.approx(1.1)          # halfway between 1.0 and 1.2
    assert run.workload.arrived_at.tolist() == [0.0, 0.5, 1.0, 2.0]
    assert run.workload.num_prefill_tokens.tolist() == [100, 200, 300, 400]
    assert run.workload.num_decode_tokens.tolist() == [10, 20, 30, 40]
    assert run.output_tokens == 25.0


def test_a_request_log_reads_the_servers_knobs_and_gpu_from_meta():
    """RTX 4090 -> rtx-4090; Llama-3.1-8B is the catalog's llama-3.1-8b (its own id before Vidur's alias,
    llama-3-8b); vLLM's knobs and KV blocks."""
    [run] = read_files("log", log_files(folder="vllm/"), ReadOptions())
    scenario = run.scenario
    assert (scenario["model"], scenario["device"], scenario["max_model_len"]) == ("llama-3.1-8b", "rtx-4090", 8192)
    assert {key: scenario["scheduler"][key] for key in ("max_num_seqs", "max_num_batched_tokens", "num_blocks")} == \
        {"max_num_seqs": 128, "max_num_batched_tokens": 2048, "num_blocks": 500}


def test_a_request_log_is_the_engines_own_times_so_the_replay_adds_no_api_server():
    """vLLM's per-request stats stamp the first and last token when the engine core made them and
    the arrival after tokenization: vllm_v1's API server (6.6 ms by default) is not in them, so the
    scenario sets it to 0, and says so in the run's notes."""
    [run] = read_files("log", log_files(), ReadOptions())
    assert run.scenario["scheduler"]["api_server_s"] == 0.0
    assert any("api_server_s 0" in note for note in run.notes)


def test_a_request_log_of_a_moe_model_with_data_and_expert_parallelism_keeps_both():
    """Qwen3-30B-A3B served with data_parallel_size 2 and enable_expert_parallel on 1-GPU ranks
    (LLMServingSim's RTX PRO 6000 run): two attention DP ranks that share the MoE layers, the 128
    experts split over DP x TP = 2 GPUs, requests routed to the least loaded rank."""
    engine = {**META["engine_kwargs"], "model": "Qwen/Qwen3-30B-A3B-Instruct-2507", "data_parallel_size": 2,
              "enable_expert_parallel": True}
    [run] = read_files("log", log_files(meta={**META, "engine_kwargs": engine}), ReadOptions())
    assert run.scenario["model"] == "qwen3-30b-a3b"
    assert run.scenario["cluster"] == {"num_replicas": 1, "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
                                       "data_parallel_size": 2, "expert_parallel_size": 2,
                                       "global_scheduler": "least_outstanding"}
    assert scenario_config(run).cluster.expert_parallel_size == 2     # a valid scenario


def test_a_request_log_of_a_dense_model_with_data_parallelism_is_that_many_replicas():
    """Llama-3.1-8B with data_parallel_size 3 (and enable_expert_parallel, which a dense model
    ignores): three independent engines behind one API server, i.e. three replicas."""
    engine = {**META["engine_kwargs"], "data_parallel_size": 3, "enable_expert_parallel": True}
    [run] = read_files("log", log_files(meta={**META, "engine_kwargs": engine}), ReadOptions())
    assert run.scenario["cluster"] == {"num_replicas": 3, "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
                                       "global_scheduler": "least_outstanding"}


def test_a_request_that_never_produced_a_token_is_a_failure():
    """r3 has no first/last token time: the figures are the other three's (TTFT mean 0.3)."""
    rows = [*ROWS[:3], {**ROWS[3], "first_token_ts": None, "last_token_ts": None}]
    [run] = read_files("log", log_files(rows), ReadOptions())
    stage = run.stage(WHOLE_RUN)
    assert stage.values["ttft"]["mean"] == pytest.approx(0.3)
    assert (stage.num_failed, run.saturated) == (1, True)


@pytest.mark.parametrize("rows,meta,options,message", [
    ([*ROWS[:1], {**ROWS[1], "queued_ts": "late"}], META, ReadOptions(),
     "requests.jsonl: line 2: field 'queued_ts': expected a number, got 'late'"),
    ([*ROWS[:2], {**ROWS[2], "input_toks": 0}], META, ReadOptions(),
     "requests.jsonl: line 3: field 'input_toks': expected at least 1, got 0"),
    (ROWS, {**META, "hardware": {"device_name": "NVIDIA GeForce RTX 5090"}}, ReadOptions(),
     "meta.json: hardware.device_name 'NVIDIA GeForce RTX 5090' has no catalog entry"),
    (ROWS, {**META, "engine_kwargs": {"model": "google/gemma-2-9b-it"}}, ReadOptions(),
     "meta.json: model 'google/gemma-2-9b-it' has no catalog entry"),
    (ROWS, {**META, "hardware": {}}, ReadOptions(), "meta.json: hardware.device_name: no GPU named"),
    (ROWS, {**META, "engine_kwargs": {**META["engine_kwargs"], "data_parallel_size": "two"}}, ReadOptions(),
     "meta.json: engine_kwargs.data_parallel_size: expected a whole number from 1 to 64, got 'two'"),
])
def test_a_bad_request_log_is_named_by_file_line_and_field(rows, meta, options, message):
    with pytest.raises(ConfigError) as error:
        read_files("log", log_files(rows, meta), options)
    assert str(error.value).startswith(message)


def test_a_gpu_the_user_picks_overrides_one_missing_from_the_catalog():
    """A run on an RTX 5090 (no catalog entry) replays on the GPU given as `device`."""
    meta = {**META, "hardware": {"device_name": "NVIDIA GeForce RTX 5090"}}
    [run] = read_files("log", log_files(meta=meta), ReadOptions(device="l40s"))
    assert run.scenario["device"] == "l40s"


def test_a_run_folder_on_disk_is_read_by_its_layout(tmp_path):
    """A folder of runs: one per-request log under `<run>/vllm/`, one bench JSON folder."""
    for name, content in log_files(folder="vllm/").items():
        (tmp_path / "rtx_run" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "rtx_run" / name).write_bytes(content)
    (tmp_path / "bench_run").mkdir()
    (tmp_path / "bench_run" / "result.json").write_bytes(bench()["result.json"])
    runs = read_folder(tmp_path, ReadOptions(fallback_device="a100-80gb"))
    assert [(run.name, run.layout, run.scenario["device"]) for run in runs] == [
        ("bench_run", "vllm_bench", "a100-80gb"), ("rtx_run", "request_log", "rtx-4090")]


def test_each_run_folder_of_a_collection_may_name_its_own_gpu(tmp_path):
    """A collection of per-GPU folders whose logs name no GPU (LLMServingSim's RTX PRO 6000 runs):
    each run takes the GPU its own folder names, RTXPRO6000/ and H100/, not one for all."""
    for gpu in ("RTXPRO6000", "H100"):
        for name, content in log_files(meta={**META, "hardware": {}}, folder="vllm/").items():
            (tmp_path / gpu / "Llama-3.1-8B" / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / gpu / "Llama-3.1-8B" / name).write_bytes(content)
    runs = read_folder(tmp_path, ReadOptions())
    assert [(run.name, run.scenario["device"]) for run in runs] == [
        ("H100/Llama-3.1-8B", "h100-sxm"), ("RTXPRO6000/Llama-3.1-8B", "rtx-pro-6000")]
