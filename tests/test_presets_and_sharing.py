"""Presets show the behaviour they teach; the URL token round-trips and old links (every
choice's knobs at their defaults) still open; the memory bar adds up."""

import copy
import json
import re

import pytest

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.config.share import decode_scenario, encode_scenario
from sim_core.memory import plan_memory
from sim_core.memory.breakdown import memory_breakdown
from sim_core.scenarios.defaults import DEFAULT_SCENARIO
from sim_core.scenarios.presets import PRESETS, preset
from sim_core.viz.memory import memory_facts, memory_figure


def _summary(name: str) -> dict:
    return run_simulation(parse_config(preset(name).scenario)).summary


def test_every_preset_is_a_valid_scenario_with_a_lesson():
    for item in PRESETS:
        parse_config(item.scenario)
        assert item.lesson and item.look_at


def test_the_tight_kv_preset_preempts_and_the_default_barely_does():
    # the counts move with the cost model's calibration; the contrast is the lesson
    assert _summary("Preemption storm when KV is tight")["num_preemptions"] >= 50
    assert 0 < _summary("Default: Llama-2-13B on A100-40GB, vLLM")["num_preemptions"] < 10


def test_chunked_prefill_cuts_the_tbt_tail_on_the_same_workload():
    full, chunked = _summary("Full prefill stalls decodes (vLLM)"), _summary("Chunked prefill smooths TBT (Sarathi)")
    assert full["tbt_p99_s"] > 5 * chunked["tbt_p99_s"]


def test_lor_cuts_the_ttft_tail_of_round_robin_by_a_third_under_skew():
    rr, lor = _summary("Round robin under skew"), _summary("Least outstanding requests under skew")
    assert lor["ttft_p99_s"] < 0.67 * rr["ttft_p99_s"]


def test_vllm_v0_swap_keeps_the_work_that_recompute_redoes():
    swap, recompute = (run_simulation(parse_config(preset(name).scenario)) for name in (
        "Swap preemption under tight KV (vLLM v0.6, V0 engine)",
        "Recompute preemption under tight KV (vLLM v0.6, V0 engine)"))
    assert swap.summary["num_swap_outs"] >= 20 and swap.requests["num_restarts"].sum() == 0
    assert recompute.summary["num_preemptions"] >= 20 and recompute.summary["num_swap_outs"] == 0
    assert recompute.batches["num_prefill_tokens"].sum() > 1.2 * swap.batches["num_prefill_tokens"].sum()
    assert swap.cache_ops["seconds"].sum() > 0.5 and not len(recompute.cache_ops)
    assert swap.summary["e2e_p50_s"] < recompute.summary["e2e_p50_s"]


def test_a_scenario_survives_the_url_token_and_a_damaged_token_is_refused():
    token = encode_scenario(DEFAULT_SCENARIO)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", token)
    assert decode_scenario(token) == DEFAULT_SCENARIO
    with pytest.raises(ConfigError, match="scenario link: not a scenario"):
        decode_scenario(token[:-8])
    with pytest.raises(ConfigError, match="top level is not a mapping"):
        decode_scenario(encode_scenario([1, 2]))


# The sections with choices as a link made before they held only their choice's knobs spelled
# them: every choice's knobs (what the flat section models dumped), those of the choices not taken
# at their defaults.
OLD_LINK_SECTIONS = {
    "predictor": {"type": "linear", "base_s": 0.005, "per_token_s": 0.0001, "compute_efficiency": None,
                  "memory_efficiency": None, "link_efficiency": 0.7, "cpu_schedule_s": 0.0005,
                  "cpu_schedule_per_request_s": 5e-06, "cpu_prepare_inputs_s": 0.0015,
                  "cpu_prepare_inputs_per_request_s": 5e-06, "cpu_sample_s": 0.001, "cpu_sample_per_request_s": 5e-06,
                  "cpu_process_outputs_s": 0.001, "cpu_process_outputs_per_request_s": 5e-06, "profiles_dir": None,
                  "estimator": "random_forest", "cache_dir": None},
    "memory": {"planner": "vidur", "margin_fraction": 0.1, "framework_reserve_gib": 1.0},
    "arrival": {"process": "poisson", "qps": 5.0, "cv": 1.0, "on_s": 10.0, "off_s": 20.0, "off_qps": 0.0,
                "period_s": 86400.0, "amplitude": 0.5, "rate_curve": [], "trace_file": None, "trace_format": "auto"},
    "prompt_tokens": {"distribution": "fixed", "value": 256, "min": 16, "max": 1024, "theta": 1.1, "mean": 256.0,
                      "sigma": 1.0, "trace_file": None, "trace_format": "auto"},
}


def _old_link_scenario() -> dict:
    old = copy.deepcopy(DEFAULT_SCENARIO)
    old["predictor"], old["memory"] = OLD_LINK_SECTIONS["predictor"], OLD_LINK_SECTIONS["memory"]
    old["workload"]["arrival"], old["workload"]["prompt_tokens"] = (OLD_LINK_SECTIONS["arrival"],
                                                                    OLD_LINK_SECTIONS["prompt_tokens"])
    return old


def test_an_old_link_with_the_knobs_of_other_choices_at_their_defaults_opens_as_its_choices():
    """Each section keeps its choice's knobs; a knob of another choice that was edited (the old
    app hid it but kept it) is refused naming the choices that read it."""
    config = parse_config(decode_scenario(encode_scenario(_old_link_scenario())))
    assert config.predictor.model_dump() == {"type": "linear", "base_s": 0.005, "per_token_s": 0.0001}
    assert config.memory.model_dump() == {"planner": "vidur", "margin_fraction": 0.1}
    assert config.workload.arrival.model_dump() == {"process": "poisson", "qps": 5.0}
    assert config.workload.prompt_tokens.model_dump() == {"distribution": "fixed", "value": 256}
    edited = _old_link_scenario()
    edited["workload"]["prompt_tokens"]["min"] = 64
    with pytest.raises(ConfigError) as error:
        parse_config(decode_scenario(encode_scenario(edited)))
    assert str(error.value) == ("scenario: workload.prompt_tokens.min: got 64; fixed does not read it (read by: "
                                "uniform, zipf, lognormal)")


def test_the_memory_bars_add_up_to_the_device_on_every_stage_and_the_facts_agree():
    config = parse_config({**DEFAULT_SCENARIO, "cluster": {"num_replicas": 1, "pipeline_parallel_size": 2}})
    plan = plan_memory(config)
    breakdown = memory_breakdown(config, plan)
    figure = memory_figure(breakdown, "a100-40gb")
    totals = [sum(trace.x[stage] for trace in figure.data) for stage in range(2)]
    assert totals == pytest.approx([plan.device_bytes / 1024**3] * 2)
    facts = memory_facts(breakdown, plan)
    assert facts["KV capacity (tokens)"] == f"{plan.num_blocks * 16:,}"
    assert facts["blocks per max-length request"] == "256"


def test_the_memory_figure_keeps_its_legend_above_the_plot_and_its_unit_on_the_ticks():
    """Issue 19 item 8: no "GiB" axis title for the legend to overlap; the legend sits above the
    bars, the unit on each tick."""
    config = parse_config(DEFAULT_SCENARIO)
    layout = json.loads(memory_figure(memory_breakdown(config, plan_memory(config)), "a100-40gb").to_json())["layout"]
    assert "title" not in layout["xaxis"] and layout["xaxis"]["ticksuffix"] == " GiB"
    assert (layout["legend"]["y"], layout["legend"]["yanchor"]) == (1.02, "bottom")
