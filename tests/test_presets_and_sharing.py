"""Presets show the behaviour they teach; knob applicability matches the descriptions; the
URL token round-trips; the memory bar adds up."""

import re

import pytest

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.config import SimulationConfig
from sim_core.config.applicability import APPLIES, applies
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


def _section_model(path: str):
    model = SimulationConfig
    for part in path.split("."):
        model = model.model_fields[part].annotation
    return model


@pytest.mark.parametrize("section", sorted(APPLIES))
def test_the_applicability_table_matches_the_field_descriptions(section):
    """A description that starts with "a/b: ..." (values of the discriminator) must be listed
    for exactly a and b; a knob read by every value must not start that way."""
    discriminator, table = APPLIES[section]
    model = _section_model(section)
    values = set(model.model_fields[discriminator].annotation.__args__)
    for name, field in model.model_fields.items():
        top_level = re.sub(r"\([^)]*\)", "", field.description or "")     # asides in parentheses do not count
        prefixes = re.findall(r"(?:^|; )([a-z0-9_/]+):", top_level)
        named = {v for p in prefixes for v in p.split("/") if v in values}
        if name != discriminator:
            assert named == set(table.get(name, ())), f"{section}.{name}"


def test_applies_hides_knobs_of_other_choices():
    assert applies("workload.arrival", "cv", {"process": "gamma"})
    assert not applies("workload.arrival", "cv", {})            # poisson is the default
    assert applies("cluster", "num_replicas", {})


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
