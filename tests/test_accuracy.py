"""Measured benchmark runs: the inference-perf and BLIS readers rebuild the client's load and the
server's knobs, replay measures simulated requests the way the client measured real ones, and
the comparison reports signed and median absolute errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from sim_core.accuracy.blis_table import read_blis_table
from sim_core.accuracy.client_load import LoadStage, prompt_hashes, send_times, shared_prefix_workload
from sim_core.accuracy.compare import comparison, median_errors
from sim_core.accuracy.layouts import ReadOptions, read_files, read_folder
from sim_core.accuracy.measured import WHOLE_RUN, MeasuredRun, MeasuredStage
from sim_core.accuracy.replay import replay
from sim_core.errors import ConfigError
from sim_core.memory.prefix_keys import PrefixKeys
from sim_core.workload import Workload


def test_constant_load_rescales_exponential_gaps_to_fill_each_stage():
    """inference-perf's constant load: 2 req/s for 10 s sends 20 requests whose exponential gaps
    are stretched so the last send lands at 10 s exactly; the next stage starts at 10 s."""
    stages = [LoadStage(2.0, 10.0), LoadStage(4.0, 5.0)]
    first, second = send_times(stages, "constant", np.random.default_rng(7))
    gaps = np.random.default_rng(7).exponential(0.5, 20)
    assert len(first) == 20 and len(second) == 20
    assert first[-1] == pytest.approx(10.0) and second[-1] == pytest.approx(15.0)
    assert np.allclose(first, np.cumsum(gaps) * 10.0 / gaps.sum())
    assert second[0] > 10.0


def test_poisson_load_keeps_the_gaps_as_drawn():
    """A poisson stage keeps its exponential gaps: the sends are their running sum."""
    (sends,) = send_times([LoadStage(2.0, 10.0)], "poisson", np.random.default_rng(3))
    assert np.allclose(sends, np.cumsum(np.random.default_rng(3).exponential(0.5, 20)))


def test_shared_prefix_requests_cycle_through_the_prompt_pool():
    """Request n of a stage sends prompt order[n mod pool]: with a pool of 4, requests 0 and 4
    send the same prompt (the same hash row), and the second stage starts again at request 0.
    Without a system prompt each prompt is one hash block of its own 500 tokens."""
    workload = shared_prefix_workload([LoadStage(1.0, 6.0), LoadStage(1.0, 3.0)], "constant", 500, 200,
                                      np.random.default_rng(0), "test", pool=4)
    prompts = [int(workload.hashes_of(row)[0]) for row in range(len(workload))]
    assert len(workload) == 9 and workload.hash_block_size == 500
    assert sorted(prompts[:4]) == [0, 1, 2, 3]
    assert prompts[4] == prompts[0] and prompts[5] == prompts[1]
    assert prompts[6:9] == prompts[:3]           # the second stage starts again at request 0
    assert set(workload.num_prefill_tokens) == {500} and set(workload.num_decode_tokens) == {200}


def test_prompt_hashes_share_the_system_prompt_within_its_group():
    """4 prompts of 250 tokens, system prompts of 100 shared by 2 prompts each: blocks of 100
    tokens, ceil(250 / 100) = 3 per prompt; the 2 groups take hashes 0 and 1, the prompts' own
    blocks 2 + (0..11) laid out row by row, block 0 replaced by the group (p // 2):
    [[0, 3, 4], [0, 6, 7], [1, 9, 10], [1, 12, 13]]."""
    block, table = prompt_hashes(4, 250, 100, 2)
    assert block == 100
    assert table.tolist() == [[0, 3, 4], [0, 6, 7], [1, 9, 10], [1, 12, 13]]
    # no system prompt (or one as long as the prompt): each prompt is one block of its own
    assert prompt_hashes(3, 250, 0, 2)[0] == 250 and prompt_hashes(3, 250, 0, 2)[1].tolist() == [[0], [1], [2]]
    assert prompt_hashes(3, 250, 250, 2)[1].tolist() == [[0], [1], [2]]


def test_a_new_prompt_of_a_cached_group_hits_its_system_prompt_blocks():
    """inference-perf's prompt = the group's system prompt + its own question. With 100 system
    tokens of a 250-token prompt and cache blocks of 16: two prompts of one group share cache
    blocks 0-5 (tokens 0-95, all system prompt) and differ from block 6 (96-111 holds question
    tokens); prompts of two groups share no block; a repeat of one prompt shares all 15 full
    prompt blocks (0-239) and differs at block 15 (240-255: its last 10 prompt tokens and its own
    output)."""
    workload = shared_prefix_workload([LoadStage(1.0, 8.0)], "constant", 250, 20, np.random.default_rng(1), "test",
                                      pool=4, system_tokens=100, per_system_prompt=2)
    keys = PrefixKeys(workload, 16)
    prompt = [int(workload.hashes_of(row)[1]) for row in range(len(workload))]   # the prompt's own block
    group = [int(workload.hashes_of(row)[0]) for row in range(len(workload))]
    first = {p: prompt.index(p) for p in set(prompt)}
    same_group = [first[p] for p in sorted(first) if group[first[p]] == 0]
    other_group = next(first[p] for p in first if group[first[p]] == 1)
    a, b = (keys.block_keys(row) for row in same_group)
    assert len(a) == (250 + 20) // 16 == 16
    assert a[:6] == b[:6] and a[6] != b[6]
    assert not set(a) & set(keys.block_keys(other_group))
    repeat = prompt.index(prompt[0], 1)          # the first prompt sent again (request 4)
    assert repeat == 4
    again = keys.block_keys(repeat)
    assert keys.block_keys(0)[:15] == again[:15] and keys.block_keys(0)[15] != again[15]


def _summary(ttft: float, e2e: float, failures: int = 0, count: int = 20, prompt_mean: float = 575.4) -> dict:
    def stats(mean: float) -> dict:
        return {"mean": mean, "median": mean * 0.9, "p90": mean * 1.5, "p99": mean * 2.0}
    return {"load_summary": {"count": count},
            "successes": {"count": count - failures, "prompt_len": {"mean": prompt_mean},
                          "latency": {"time_to_first_token": stats(ttft), "request_latency": stats(e2e)}},
            "failures": {"count": failures}}


def _write_inference_perf(folder: Path, model: str = "meta-llama/Llama-2-7b-hf", failures: int = 0) -> Path:
    (folder / "results").mkdir(parents=True)
    profile = {"load": {"type": "constant", "stages": [{"rate": 2, "duration": 10}, {"rate": 4, "duration": 5}]},
               "data": {"type": "shared_prefix", "shared_prefix": {
                   "system_prompt_len": 100, "question_len": 447, "output_len": 48, "enable_multi_turn_chat": True}},
               "server": {"model_name": model, "ignore_eos": True}}
    (folder / "profile.yaml").write_text(json.dumps(profile))
    (folder / "exp-config.yaml").write_text(f"model: {model}\ntensor_parallelism: 2\nmax_model_len: 2048\n"
                                            "max_num_batched_tokens: 512\nmax_num_seqs: 8\n")
    (folder / "results" / "summary_lifecycle_metrics.json").write_text(json.dumps(_summary(0.03, 0.5, failures, 40)))
    (folder / "results" / "stage_0_lifecycle_metrics.json").write_text(json.dumps(_summary(0.02, 0.4)))
    (folder / "results" / "stage_1_lifecycle_metrics.json").write_text(json.dumps(_summary(0.04, 0.6, failures)))
    return folder


def test_inference_perf_folder_becomes_a_vllm_v1_scenario_and_per_stage_figures(tmp_path):
    """A run folder named after an H100: Llama-2-7B on TP 2 with vLLM's knobs from
    exp-config.yaml; 20 + 20 requests of 575 prompt tokens (the measured mean, rounded) and 48
    output tokens, their system prompts of 100 tokens as prefix-block hashes (ceil(575 / 100) = 6
    blocks a request, block 0 one of the 10 groups' hashes 0-9); the whole run measured over
    0-15 s, stage 0 over 0-10 s, stage 1 over 10-15 s."""
    (run,) = read_folder(_write_inference_perf(tmp_path / "20260217-llama-h100-general"))
    assert run.scenario["model"] == "llama-2-7b" and run.scenario["device"] == "h100-sxm"
    assert run.scenario["cluster"]["tensor_parallel_size"] == 2 and run.scenario["max_model_len"] == 2048
    assert run.scenario["scheduler"] == {"type": "vllm_v1", "max_num_seqs": 8, "enable_prefix_caching": True,
                                         "block_size": 16, "async_scheduling": True, "max_num_batched_tokens": 512}
    assert len(run.workload) == 40 and set(run.workload.num_prefill_tokens) == {575}
    assert run.output_tokens == 48.0
    assert run.workload.hash_block_size == 100
    assert all(len(run.workload.hashes_of(row)) == 6 for row in range(40))
    assert {int(run.workload.hashes_of(row)[0]) for row in range(40)} <= set(range(10))
    windows = [(s.index, s.start_s, s.end_s, s.rate) for s in run.stages[1:]]
    assert windows == [(0, 0.0, 10.0, 2.0), (1, 10.0, 15.0, 4.0)]
    whole = run.stage(WHOLE_RUN)
    assert whole is not None and (whole.start_s, whole.end_s) == (0.0, 15.0)
    assert whole.values["ttft"] == {"mean": 0.03, "p50": 0.027, "p90": pytest.approx(0.045), "p99": 0.06}
    assert not run.saturated


def test_failed_requests_mark_a_run_saturated(tmp_path):
    """Client time-outs (failures) mean the server could not keep up: the run is saturated."""
    (run,) = read_folder(_write_inference_perf(tmp_path / "run-a100", failures=3))
    assert run.saturated and run.scenario["device"] == "a100-80gb"


def test_a_run_without_a_gpu_name_asks_for_one(tmp_path):
    """Neither the experiment config nor the folder names a GPU: the error says to give --device,
    and giving it works."""
    folder = _write_inference_perf(tmp_path / "myrun")
    with pytest.raises(ConfigError, match=r"no GPU named .* \(--device\)"):
        read_folder(folder, ReadOptions(fallback_device=None, device=None))
    (run,) = read_folder(folder, ReadOptions(device="l40s"))
    assert run.scenario["device"] == "l40s"


def test_bad_inference_perf_files_are_named(tmp_path):
    """A load type the client rebuild does not know, and a missing results section, are errors
    naming the file and the field."""
    folder = _write_inference_perf(tmp_path / "run-h100")
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    profile = json.loads(files["profile.yaml"])
    profile["load"]["type"] = "trace_replay"
    with pytest.raises(ConfigError, match=r"profile.yaml: load.type 'trace_replay'"):
        read_files("run-h100", {**files, "profile.yaml": json.dumps(profile).encode()})
    summary = json.loads(files["results/summary_lifecycle_metrics.json"])
    del summary["successes"]["latency"]
    with pytest.raises(ConfigError, match=r"results/summary_lifecycle_metrics.json: missing section 'latency'"):
        read_files("run-h100", {**files, "results/summary_lifecycle_metrics.json": json.dumps(summary).encode()})
    with pytest.raises(ConfigError, match=r"not a measured run this tool can read"):
        read_files("x", {"notes.txt": b"hello"})


SPECS = {"experiments": [
    {"id": "7", "model": "meta-llama/Llama-2-7b-hf", "hardware": "H100", "tp": 1, "max_num_seqs": 64,
     "max_num_batched_tokens": 1024, "total_kv_blocks": 5000, "cpu_kv_blocks": 100,
     "workload": {"inference_perf": {"shared_prefix": {"system_prompt_len": 100, "question_len": 400,
                                                        "output_len": 100},
                                     "stages": [{"rate": 1.0, "duration": 20}, {"rate": 2.0, "duration": 10}]}}},
    {"id": "8", "model": "org/Unknown-12B", "model_config_dir": "model_configs/unknown", "hardware": "H100", "tp": 1,
     "workload": {"inference_perf": {"shared_prefix": {"system_prompt_len": 50, "question_len": 50, "output_len": 10},
                                     "stages": [{"rate": 1, "duration": 5}]}}},
]}
ACTUALS = ("set,experiment,exp_id,model,stage_index,e2e_mean_ms,e2e_p90_ms,e2e_p99_ms,ttft_mean_ms,ttft_p90_ms,"
           "ttft_p99_ms,tpot_from_means_ms\n"
           "t,7-llama-run,7,m,-1,2000,2500,3000,40,50,60,19.8\n"
           "t,7-llama-run,7,m,1,2200,2600,3100,45,55,65,21.8\n"
           "t,8-unknown-run,8,m,-1,1000,1100,1200,20,30,40,9.9\n")


def test_blis_tables_give_one_run_per_measured_experiment():
    """Experiment 7 (Llama-2-7B, H100) has whole-run and stage-1 rows: milliseconds become
    seconds, stage 1 spans 20-30 s of a 30 s run, the KV blocks and knobs reach the scheduler, and
    the CPU offload it ran with is noted. The table's own per-token time (which divides by the
    client's token count) is not read: `itl` comes from the means, as for the simulated run.
    Experiment 8's model has no catalog entry and no config.json among the files: it is read but
    marked unsupported with the reason."""
    files = {"blis_trainval_specs.json": json.dumps(SPECS).encode(), "blis_trainval_actuals.csv": ACTUALS.encode()}
    runs = read_blis_table(files, None, 42)
    llama, unknown = runs
    assert llama.name == "7-llama-run" and llama.scenario["scheduler"]["num_blocks"] == 5000
    assert llama.scenario["scheduler"]["max_num_batched_tokens"] == 1024
    assert len(llama.workload) == 40 and set(llama.workload.num_prefill_tokens) == {500}
    assert [(s.index, s.start_s, s.end_s) for s in llama.stages] == [(-1, 0.0, 30.0), (1, 20.0, 30.0)]
    assert llama.stages[1].values == {"e2e": {"mean": 2.2, "p90": 2.6, "p99": 3.1},
                                      "ttft": {"mean": 0.045, "p90": 0.055, "p99": 0.065}}
    assert any("CPU KV-cache offloading (100 blocks)" in note for note in llama.notes)
    assert unknown.unsupported.startswith("model 'org/Unknown-12B' has no catalog entry")


def test_a_model_outside_the_catalog_comes_from_its_config_json_quantized_or_not():
    """Mistral-Nemo style: head_dim 128 where hidden / heads would be 160: the run's model is built
    from the config.json among the files with that head_dim (its query projection is 32 x 128 =
    4,096 wide, not 5,120). An FP8 quantization block gives FP8 weights; a key the import does not
    know that would change shapes keeps the run, as unsupported, naming the key."""
    config = {"hidden_size": 5120, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
              "num_hidden_layers": 40, "intermediate_size": 14336, "vocab_size": 131072}
    files = {"blis_trainval_specs.json": json.dumps(SPECS).encode(), "blis_trainval_actuals.csv": ACTUALS.encode(),
             "model_configs/unknown/config.json": json.dumps(config).encode()}
    unknown = read_blis_table(files, None, 42)[1]
    assert not unknown.unsupported
    spec = unknown.scenario["models"][unknown.scenario["model"]]
    assert (spec["head_dim"], spec["embedding_dim"], spec["num_q_heads"], spec["num_kv_heads"]) == (128, 5120, 32, 8)
    quantized = {**config, "quantization_config": {"quant_method": "fp8"}}
    files["model_configs/unknown/config.json"] = json.dumps(quantized).encode()
    fp8 = read_blis_table(files, None, 42)[1]
    assert not fp8.unsupported and fp8.scenario["models"][fp8.scenario["model"]]["weight_dtype"] == "fp8"
    files["model_configs/unknown/config.json"] = json.dumps({**config, "index_topk": 2048}).encode()
    assert "index_topk" in read_blis_table(files, None, 42)[1].unsupported


def _linear_run(ttft: float, e2e: float) -> MeasuredRun:
    workload = Workload(np.array([0.0]), np.array([10]), np.array([3]), "test")
    scenario = {"name": "toy", "model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 256,
                "scheduler": {"type": "vllm", "num_blocks": 64, "block_size": 16},
                "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
                "engine": {"record": "requests"}}
    values = {"ttft": {"mean": ttft}, "e2e": {"mean": e2e}}
    stage = MeasuredStage(WHOLE_RUN, 0.0, 1.0, float("nan"), 1, 0, values)
    return MeasuredRun("toy", "test", scenario, workload, (stage,), 3.0)


def test_replay_measures_like_the_client_and_compares():
    """One request of 10 prompt and 3 output tokens at 10 ms + 1 ms/token: the prefill ends at
    20 ms (TTFT), two decodes of 11 ms end it at 42 ms (E2E), so the time per output token from
    the means is 22 / 2 = 11 ms. Against a measured TTFT of 25 ms and E2E of 40 ms the errors
    are -20% and +5%; the measured itl is (40 - 25) / 2 = 7.5 ms, so +46.7%."""
    result = replay(_linear_run(0.025, 0.040))
    values = result.stages[0].values
    assert values["ttft"]["mean"] == pytest.approx(0.020) and values["e2e"]["mean"] == pytest.approx(0.042)
    assert values["itl"]["mean"] == pytest.approx(0.011)
    table = comparison([result]).set_index("metric")
    assert table.loc["ttft", "error_pct"] == pytest.approx(-20.0)
    assert table.loc["e2e", "error_pct"] == pytest.approx(5.0)
    assert table.loc["itl", "measured_s"] == pytest.approx(0.0075)
    assert table.loc["itl", "error_pct"] == pytest.approx(46.6667, abs=1e-3)
    assert median_errors(comparison([result])) == pytest.approx({"e2e mean": 5.0, "ttft mean": 20.0,
                                                                 "itl mean": 46.6667}, abs=1e-3)
    assert not result.collapsed


def test_a_run_whose_prompts_would_have_no_tokens_is_named():
    """shared_prefix without system prompt or question: prompts of 0 tokens cannot be replayed;
    the error names the source and the fields."""
    with pytest.raises(ConfigError, match=r"src: shared_prefix: prompts \(0\) and outputs \(10\) need at least 1"):
        shared_prefix_workload([LoadStage(1.0, 5.0)], "constant", 0, 10, np.random.default_rng(0), "src")


def test_median_errors_take_the_median_over_runs():
    """Three runs with E2E errors -10%, +2% and +30%: the median absolute error is 10%."""
    runs = [replay(_linear_run(0.020, 0.042 / (1 + e))) for e in (-0.10, 0.02, 0.30)]
    assert median_errors(comparison(runs))["e2e mean"] == pytest.approx(10.0)


def test_accuracy_command_prints_the_table_and_names_bad_folders(tmp_path):
    """`python -m sim_core accuracy` replays a run folder and prints one JSON object with the rows
    and the medians; a folder holding no run is an error (exit 2) naming what was expected."""
    folder = _write_inference_perf(tmp_path / "runs" / "run-h100")
    done = subprocess.run([sys.executable, "-m", "sim_core", "accuracy", str(folder.parent), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [run["name"] for run in report["runs"]] == ["run-h100"]
    stages = {(row["stage"], row["metric"], row["stat"]) for row in report["rows"]}
    assert ("all", "e2e", "mean") in stages and ("1", "ttft", "p99") in stages and ("0", "itl", "mean") in stages
    assert set(report["median_abs_error_pct"]) >= {"e2e mean", "ttft mean", "itl mean"}
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run([sys.executable, "-m", "sim_core", "accuracy", str(empty)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 2 and "not a measured run this tool can read" in done.stderr


def test_a_folder_of_runs_reads_each_run_and_keeps_a_broken_one_with_its_reason(tmp_path):
    """runs/ holds a good run, a run whose profile is not YAML, and a model's config.json (not a
    run): the good run replays, the broken one is kept as unsupported naming its file, and the
    config folder is not taken for a `vllm bench` result."""
    _write_inference_perf(tmp_path / "runs" / "good-h100")
    broken = _write_inference_perf(tmp_path / "runs" / "group" / "broken-h100")
    (broken / "profile.yaml").write_text("load: [unclosed")
    (tmp_path / "runs" / "model_configs" / "llama").mkdir(parents=True)
    (tmp_path / "runs" / "model_configs" / "llama" / "config.json").write_text('{"hidden_size": 4096}')
    runs = read_folder(tmp_path / "runs")
    assert [run.name for run in runs] == ["good-h100", "group/broken-h100"]
    assert not runs[0].unsupported
    assert runs[1].unsupported.startswith("profile.yaml: not YAML/JSON")


def test_a_measured_backlog_that_keeps_growing_is_a_measured_collapse():
    """Per-request data: 100 requests sent 0.1 s apart. Served within 50 ms, nobody waits at the
    middle or the end: no collapse. If request i gets its first token only at 0.5 i s (the server
    handles 2 a second while 10 arrive), 40 of the 50 sent by the middle and 80 of the 100 by the
    end are still waiting: the queue grew by 40 (the threshold is 20), a collapse."""
    import pandas as pd

    from sim_core.accuracy.replay import measured_collapse

    sent = np.arange(100) * 0.1
    def run(ttft):
        frame = pd.DataFrame({"arrived_at": sent, "ttft": ttft, "e2e": ttft + 1.0})
        return MeasuredRun("r", "test", {}, Workload(sent, np.full(100, 10), np.full(100, 5), "t"), (), 5.0, frame)
    assert not measured_collapse(run(np.full(100, 0.05)))
    assert measured_collapse(run(np.arange(100) * 0.5 - sent + 1e-9))
