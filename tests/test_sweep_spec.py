"""Sweep specs: the grid is the product of `vary`; every mistake a spec can make alone is one
line naming the key and what is allowed; combinations that do not validate are skipped."""

import pytest

from sim_core import ConfigError
from sim_core.sweep import build_grid, load_sweep_spec, parse_sweep_spec

BASE = {"model": "llama-2-7b", "device": "a100-80gb", "predictor": {"type": "linear"}}
SLO = {"ttft_p90_s": 2.0}


def spec(**fields):
    return parse_sweep_spec({"base": BASE, "slo": SLO, **fields}, source="s.yaml")


def error_of(**fields) -> str:
    with pytest.raises(ConfigError) as caught:
        spec(**fields)
    return str(caught.value)


def test_the_grid_is_the_product_in_vary_order_last_key_fastest():
    sweep, base = spec(vary={"scheduler.type": ["vllm", "sarathi"], "cluster.num_replicas": [1, 2, 4]})
    grid = build_grid(sweep, base)
    assert [tuple(p.values.values()) for p in grid.points] == [
        ("vllm", 1), ("vllm", 2), ("vllm", 4), ("sarathi", 1), ("sarathi", 2), ("sarathi", 4)]
    assert [p.num_gpus for p in grid.points] == [1, 2, 4, 1, 2, 4]
    assert grid.points[4].scenario["scheduler"]["type"] == "sarathi"
    assert grid.points[4].scenario["cluster"]["num_replicas"] == 2
    assert grid.points[4].label() == "type=sarathi, num_replicas=2"
    assert len({p.key for p in grid.points}) == 6


def test_num_gpus_counts_replicas_times_tp_times_pp():
    sweep, base = spec(vary={"cluster.tensor_parallel_size": [2], "cluster.pipeline_parallel_size": [4],
                             "cluster.num_replicas": [3]})
    assert build_grid(sweep, base).points[0].num_gpus == 24


def test_a_point_key_changes_with_the_slo_the_search_and_the_trace_but_not_the_price(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,5\n1,10,5\n")
    base = {**BASE, "workload": {"trace_file": "t.csv"}}

    def key(**fields):
        sweep, scenario = parse_sweep_spec({"base": base, "slo": SLO, **fields}, base_dir=tmp_path)
        return build_grid(sweep, scenario).points[0].key
    first = key()
    assert key(gpu_hour_usd=9.0) == first
    assert key(slo={"ttft_p90_s": 3.0}) != first
    assert key(search={"num_requests": 50}) != first
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,5\n1,10,6\n")
    assert key() != first


def test_combinations_that_do_not_validate_are_skipped_with_the_reason():
    """lightllm needs block_size 1: its points are skipped unless the block size varies too."""
    sweep, base = spec(vary={"scheduler.type": ["vllm", "lightllm"], "scheduler.block_size": [16, 1]})
    grid = build_grid(sweep, base)
    assert [tuple(p.values.values()) for p in grid.points] == [("vllm", 16), ("vllm", 1), ("lightllm", 1)]
    assert grid.skipped == [({"scheduler.type": "lightllm", "scheduler.block_size": 16},
                             ("point scheduler.type=lightllm, scheduler.block_size=16: scheduler.block_size: "
                              "lightllm needs 1 (got 16)"))]


def test_a_point_of_another_policy_keeps_the_base_knobs_it_reads_and_drops_the_others():
    """Base sarathi with chunk_size 256 and a batch cap of 8: its vllm point keeps the cap and the
    watermark and leaves chunk_size out (vllm's own knob takes its default)."""
    sweep, base = spec(base={**BASE, "scheduler": {"type": "sarathi", "chunk_size": 256, "batch_size_cap": 8}},
                       vary={"scheduler.type": ["sarathi", "vllm"]})
    points = build_grid(sweep, base).points
    assert points[0].scenario["scheduler"]["chunk_size"] == 256
    assert points[1].scenario["scheduler"] == {"type": "vllm", "batch_size_cap": 8, "block_size": 16,
                                               "num_blocks": None, "watermark_blocks_fraction": 0.01,
                                               "max_tokens_in_batch": 4096}


def test_a_varied_knob_that_a_points_policy_does_not_read_skips_the_point():
    """chunk_size is varied with the type: the sarathi point runs it, the vllm point is skipped."""
    sweep, base = spec(vary={"scheduler.chunk_size": [256], "scheduler.type": ["vllm", "sarathi"]})
    grid = build_grid(sweep, base)
    assert [tuple(p.values.values()) for p in grid.points] == [(256, "sarathi")]
    assert grid.skipped == [({"scheduler.chunk_size": 256, "scheduler.type": "vllm"},
                             "point scheduler.chunk_size=256, scheduler.type=vllm: scheduler.chunk_size: got 256; "
                             "vllm does not read it (read by: sarathi)")]
    assert error_of(vary={"scheduler.chunk_size": [0]}) == (
        "s.yaml: vary.scheduler.chunk_size[0]: scheduler.chunk_size: got 0; allowed range 1 .. 10000000")


def test_every_section_with_choices_is_varied_like_the_scheduler():
    """The arrival process varied: the bursty point keeps the base's rate, drops its cv and takes
    bursty's own defaults; varied with a cv, the gamma point runs it and the bursty one is skipped; a bad
    cv is refused as gamma sees it even though the base's process (poisson) does not read it."""
    base = {**BASE, "workload": {"arrival": {"process": "gamma", "qps": 4.0, "cv": 2.0}}}
    sweep, scenario = spec(base=base, vary={"workload.arrival.process": ["gamma", "bursty"]})
    points = build_grid(sweep, scenario).points
    assert [p.scenario["workload"]["arrival"] for p in points] == [
        {"process": "gamma", "qps": 4.0, "cv": 2.0},
        {"process": "bursty", "qps": 4.0, "on_s": 10.0, "off_s": 20.0, "off_qps": 0.0}]
    sweep, scenario = spec(base=base, vary={"workload.arrival.cv": [3.0], "workload.arrival.process": ["gamma",
                                                                                                       "bursty"]})
    grid = build_grid(sweep, scenario)
    assert [p.scenario["workload"]["arrival"] for p in grid.points] == [{"process": "gamma", "qps": 4.0, "cv": 3.0}]
    assert grid.skipped == [({"workload.arrival.cv": 3.0, "workload.arrival.process": "bursty"},
                             "point workload.arrival.cv=3.0, workload.arrival.process=bursty: workload.arrival.cv: "
                             "got 3.0; bursty does not read it (read by: gamma)")]
    assert error_of(vary={"workload.arrival.cv": [0]}) == (
        "s.yaml: vary.workload.arrival.cv[0]: workload.arrival.cv: got 0; allowed range 0.0 (exclusive) .. 100.0")


def test_a_grid_without_a_valid_point_is_an_error():
    sweep, base = spec(vary={"cluster.tensor_parallel_size": [3]})
    with pytest.raises(ConfigError, match="none of the 1 combination"):
        build_grid(sweep, base)


def test_unknown_vary_key_lists_the_fields_of_its_section():
    from sim_core.config.policies import scheduler_fields

    # every policy's knobs, in registration order (the list grows as policies add knobs)
    assert error_of(vary={"scheduler.chunk": [1]}) == (
        "s.yaml: vary.scheduler.chunk: unknown key; fields of scheduler: type, batch_size_cap, block_size, "
        "num_blocks, watermark_blocks_fraction, max_tokens_in_batch, chunk_size, max_waiting_iters, "
        + ", ".join(list(scheduler_fields())[8:]))
    assert "fields of the scenario: seed, model, device" in error_of(vary={"replicas": [1]})


def test_a_bad_value_names_key_position_and_allowed_values():
    assert error_of(vary={"scheduler.type": ["vllm", "fifo"]}).startswith(
        "s.yaml: vary.scheduler.type[1]: scheduler.type: got 'fifo'; allowed one of: vllm, sarathi")
    assert error_of(vary={"cluster.num_replicas": [2, 0]}) == (
        "s.yaml: vary.cluster.num_replicas[1]: cluster.num_replicas: got 0; allowed range 1 .. 1024")


def test_keys_the_search_sets_cannot_vary():
    assert "vary.workload.arrival.qps: cannot be varied: the arrival rate is what the capacity search varies" \
        in error_of(vary={"workload.arrival.qps": [1, 2]})
    assert "vary.engine.record: cannot be varied" in error_of(vary={"engine.record": ["full"]})


def test_slo_search_and_price_mistakes():
    assert "slo: unknown metric 'ttft_p95_s'; allowed: ttft_p50_s, ttft_p90_s" in error_of(slo={"ttft_p95_s": 1})
    assert error_of(slo={"ttft_p90_s": 0}) == (
        "s.yaml: slo.ttft_p90_s: got 0.0; allowed range 0 (exclusive) .. inf seconds")
    assert "search.qps_min: got 8; must be below search.qps_max (4)" in error_of(search={"qps_min": 8, "qps_max": 4})
    assert "search.num_requests: got 5; allowed range 10 .. 10000000" in error_of(search={"num_requests": 5})
    sweep, base = spec(vary={"device": ["a100-80gb", "h100-sxm"]}, gpu_hour_usd={"a100-80gb": 2.0})
    with pytest.raises(ConfigError, match="gpu_hour_usd: no price for device 'h100-sxm'"):
        build_grid(sweep, base)


def test_the_base_must_have_a_rate_to_search():
    message = error_of(base={"workload": {"arrival": {"process": "static"}}})
    assert message == ("s.yaml: base workload.arrival.process: got 'static'; the capacity search sets an arrival "
                       "rate, allowed one of: poisson, gamma, constant, bursty, diurnal (or a trace_file)")


def test_a_base_file_resolves_relative_to_the_spec_and_a_scalar_value_is_one_value(tmp_path):
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "base.yaml").write_text("model: llama-2-13b\nscheduler: {type: sarathi}\n")
    (tmp_path / "sweep.yaml").write_text("base: scenarios/base.yaml\nvary: {scheduler.chunk_size: 256}\n"
                                         "slo: {tbt_p99_s: 0.2}\n")
    sweep, base = load_sweep_spec(tmp_path / "sweep.yaml")
    assert base["model"] == "llama-2-13b" and sweep.vary == {"scheduler.chunk_size": [256]}
    (tmp_path / "sweep.yaml").write_text("base: missing.yaml\nslo: {tbt_p99_s: 0.2}\n")
    with pytest.raises(ConfigError, match="missing.yaml: file not found"):
        load_sweep_spec(tmp_path / "sweep.yaml")


def test_the_cli_reports_a_bad_spec_in_one_line_without_a_traceback(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "sweep.yaml").write_text("base: {model: llama-2-7b}\nvary: {scheduler.type: [vllm, fifo]}\n"
                                         "slo: {ttft_p90_s: 2}\n")
    command = [sys.executable, "-m", "sim_core", "sweep", "--spec", str(tmp_path / "sweep.yaml"), "--out",
               str(tmp_path / "out")]
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {tmp_path / 'sweep.yaml'}: vary.scheduler.type[1]: scheduler.type: got "
                                  "'fifo'; allowed one of: vllm, sarathi")
    assert done.stderr.count("\n") == 1
    (tmp_path / "sweep.yaml").write_text("base: {model: llama-2-7b}\nslo: {ttft_p90_s: 2}\n")
    ray = subprocess.run([*command, "--backend", "ray"], cwd=root, capture_output=True, text=True, timeout=120,
                         check=False)
    assert ray.returncode == 2
    assert ray.stderr == ("error: --address: the ray backend needs the address of a running cluster "
                          "(e.g. 127.0.0.1:6379, as printed by `ray start --head`)\n")


def test_with_pd_disaggregation_the_gpus_of_both_pools_count():
    """Prefill: 2 replicas x TP 2; decode: 3 replicas x PP 2; the cluster's own sizes are replaced."""
    pools = {"enabled": True, "prefill": {"num_replicas": 2, "tensor_parallel_size": 2},
             "decode": {"num_replicas": 3, "pipeline_parallel_size": 2}}
    sweep, base = spec(base={**BASE, "disaggregation": pools}, vary={"cluster.num_replicas": [4]})
    assert build_grid(sweep, base).points[0].num_gpus == 2 * 2 + 3 * 2
