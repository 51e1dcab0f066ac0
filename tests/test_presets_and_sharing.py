"""Presets show the behaviour they teach; knob applicability matches the descriptions; the
URL token round-trips; the memory bar adds up."""

import re

import pytest

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.config import SimulationConfig
from sim_core.config.applicability import APPLIES, applies
from sim_core.config.share import decode_scenario, encode_scenario
from sim_core.memory import plan_memory
from sim_core.presets import PRESETS, preset
from sim_core.scenarios import DEFAULT_SCENARIO
from sim_core.viz.memory import memory_facts, memory_parts


def _summary(name: str) -> dict:
    return run_simulation(parse_config(preset(name).scenario)).summary


def test_every_preset_is_a_valid_scenario_with_a_lesson():
    for item in PRESETS:
        parse_config(item.scenario)
        assert item.lesson and item.look_at


def test_the_tight_kv_preset_preempts_and_the_default_barely_does():
    assert _summary("Preemption storm when KV is tight")["num_preemptions"] == 65
    assert _summary("Default: Llama-2-13B on A100-40GB, vLLM")["num_preemptions"] == 3


def test_chunked_prefill_cuts_the_tbt_tail_on_the_same_workload():
    full, chunked = _summary("Full prefill stalls decodes (vLLM)"), _summary("Chunked prefill smooths TBT (Sarathi)")
    assert full["tbt_p99_s"] > 5 * chunked["tbt_p99_s"]


def test_lor_roughly_halves_the_ttft_tail_of_round_robin_under_skew():
    rr, lor = _summary("Round robin under skew"), _summary("Least outstanding requests under skew")
    assert lor["ttft_p99_s"] < 0.6 * rr["ttft_p99_s"]


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
        prefixes = re.findall(r"(?:^|; )([a-z_/]+):", field.description or "")
        named = {v for p in prefixes for v in p.split("/") if v in values}
        if name != discriminator:
            assert named == set(table.get(name, ())), f"{section}.{name}"


def test_applies_hides_knobs_of_other_policies():
    assert applies("scheduler", "chunk_size", {"type": "sarathi"})
    assert not applies("scheduler", "chunk_size", {"type": "vllm"})
    assert applies("scheduler", "batch_size_cap", {"type": "orca"})
    assert not applies("workload.arrival", "cv", {})            # poisson is the default
    assert applies("cluster", "num_replicas", {})


def test_the_memory_bar_adds_up_to_the_device_and_the_facts_are_consistent():
    config = parse_config(DEFAULT_SCENARIO)
    plan = plan_memory(config)
    parts = memory_parts(plan)
    assert sum(parts.values()) == pytest.approx(plan.device_bytes)
    assert memory_facts(plan, 16)["KV blocks per replica"] == "768"
    assert memory_facts(plan, 16)["KV capacity (tokens)"] == "12,288"
