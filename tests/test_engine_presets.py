"""The engine presets show what they teach (on the roofline cost model; the contrasts are the
lesson, the exact figures move with its calibration)."""

import copy

from sim_core import parse_config, run_simulation
from sim_core.scenarios.presets import preset


def _summary(name: str, **scheduler) -> dict:
    scenario = copy.deepcopy(preset(name).scenario)
    scenario["scheduler"].update(scheduler)
    return run_simulation(parse_config(scenario)).summary


def test_the_unified_budget_halves_the_tbt_tail_of_prefill_first_on_the_same_workload():
    v1 = _summary("vLLM V1 engine (v0.33): one token budget")
    v0 = _summary("Full prefill stalls decodes (vLLM)")
    assert v0["tbt_p99_s"] > 2 * v1["tbt_p99_s"]


def test_prefix_caching_serves_most_system_prompt_tokens_and_cuts_ttft():
    name = "vLLM V1 engine (v0.33): prefix caching of system prompts"
    cached, uncached = _summary(name), _summary(name, enable_prefix_caching=False)
    assert cached["prefix_hit_rate"] > 0.8 and uncached["prefix_cached_tokens"] == 0
    assert uncached["ttft_p50_s"] > 10 * cached["ttft_p50_s"]


def test_the_radix_cache_reuses_earlier_turns_of_a_chat():
    name = "SGLang (v0.4): radix cache on multi-turn chat"
    cached, uncached = _summary(name), _summary(name, enable_prefix_caching=False)
    assert cached["prefix_hit_rate"] > 0.8
    assert uncached["ttft_p99_s"] > 10 * cached["ttft_p99_s"]


def test_p_d_with_prefix_caches_moves_only_what_the_decode_replica_lacks():
    """Agentic sessions on vLLM V1 P/D: the decode replica holds earlier turns' blocks, so the
    link carries a small share of the prompts; with caching off every prompt moves whole."""
    name = "vLLM V1 engine (v0.33): P/D with prefix caches on both pools"
    shares = {}
    for caching in (True, False):
        scenario = copy.deepcopy(preset(name).scenario)
        scenario["scheduler"]["enable_prefix_caching"] = caching
        result = run_simulation(parse_config(scenario))
        moved = result.transfers.merge(result.requests[["request_id", "num_prefill_tokens"]], on="request_id")
        assert len(moved) == int((result.requests["num_decode_tokens"] > 1).sum())
        shares[caching] = moved["num_tokens"].sum() / moved["num_prefill_tokens"].sum()
    assert shares[False] == 1.0
    assert shares[True] < 0.25
