"""Presets that teach: each is a complete scenario built to show one behaviour, with what to
look at. Pairs share a workload so that switching between them isolates one decision."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from sim_core.scenarios.defaults import DEFAULT_SCENARIO


@dataclass(frozen=True)
class Preset:
    """A named scenario and the lesson it carries."""

    name: str
    lesson: str
    look_at: str
    scenario: dict


def _merge(base: dict, changes: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


# the presets below were tuned on this base; they do not follow later changes of the default
_BASE = _merge(DEFAULT_SCENARIO, {"model": "llama-2-7b", "device": "a100-80gb",
                                  "cluster": {"num_replicas": 2, "pipeline_parallel_size": 2},
                                  "workload": {"arrival": {"qps": 8.0}}})


def _scenario(name: str, **changes: Any) -> dict:
    return _merge({**_BASE, "name": name}, changes)


_LONG_PROMPTS = {"num_requests": 200, "arrival": {"process": "poisson", "qps": 2.5},
                 "prompt_tokens": {"distribution": "uniform", "min": 1024, "max": 3072},
                 "output_tokens": {"distribution": "uniform", "min": 128, "max": 384}}
_SKEWED = {"num_requests": 400, "arrival": {"process": "gamma", "qps": 8.0, "cv": 3.0},
           "prompt_tokens": {"distribution": "zipf", "min": 64, "max": 3000, "theta": 0.6},
           "output_tokens": {"distribution": "zipf", "min": 16, "max": 1000, "theta": 0.6}}
_SKEW_REPLICAS = {"type": "vllm", "num_blocks": 1024}
_ONE_REPLICA = {"num_replicas": 1, "pipeline_parallel_size": 1}
_TWO_REPLICAS = {"num_replicas": 2, "pipeline_parallel_size": 1}
_PD = {"enabled": True, "link_bandwidth_gb_s": 50.0, "link_latency_s": 0.001}
_CHATS = {"num_requests": 300, "arrival": {"process": "poisson", "qps": 0.5},
          "prompt_tokens": {"distribution": "uniform", "min": 32, "max": 256},
          "output_tokens": {"distribution": "uniform", "min": 32, "max": 384},
          "sessions": {"enabled": True, "min_turns": 4, "max_turns": 12, "think_time_s": 2.0,
                       "system_prompt_tokens": 512, "num_system_prompts": 4}}
_TIGHT_KV = {"num_requests": 150, "arrival": {"process": "poisson", "qps": 1.5},
             "prompt_tokens": {"distribution": "uniform", "min": 256, "max": 1024},
             "output_tokens": {"distribution": "uniform", "min": 256, "max": 768}}

PRESETS: tuple[Preset, ...] = (
    Preset("Default: Llama-2-13B on A100-40GB, vLLM",
           "A chat workload near the capacity of a 768-block KV cache: it fills, a few requests are "
           "preempted. Raise the arrival rate in the sidebar to tip it over.",
           "Overview for the headline figures, KV cache for the blocks filling up.",
           copy.deepcopy(DEFAULT_SCENARIO)),
    Preset("Preemption storm when KV is tight",
           "With only 1,024 KV blocks (16,384 tokens), vLLM admits requests greedily and then has to "
           "preempt (recompute) the newest running ones when decodes outgrow the cache.",
           "KV cache: blocks fill, then red x marks (preemptions); Requests: sort by most restarts.",
           _scenario("preemption storm: vLLM with 1,024 KV blocks", cluster=_ONE_REPLICA,
                     scheduler={"type": "vllm", "num_blocks": 1024},
                     workload={"num_requests": 150, "arrival": {"process": "poisson", "qps": 1.5},
                               "prompt_tokens": {"distribution": "uniform", "min": 256, "max": 1024},
                               "output_tokens": {"distribution": "uniform", "min": 256, "max": 768}})),
    Preset("Full prefill stalls decodes (vLLM)",
           "vLLM runs a whole prompt as its own iteration and pauses every decode meanwhile: long "
           "prompts make token gaps spike. Same workload as the next preset.",
           "Overview: worst-TBT CDF tail; Pipeline: long prefill bars between short decodes.",
           _scenario("full prefill: vLLM, long prompts", cluster=_ONE_REPLICA, scheduler={"type": "vllm"},
                     workload=_LONG_PROMPTS)),
    Preset("Chunked prefill smooths TBT (Sarathi)",
           "Sarathi cuts prompts into 512-token chunks that share each iteration with the running "
           "decodes, so no decode waits for a whole prompt.",
           "Overview: compare the worst-TBT CDF with the previous preset; Requests: prefill chunks.",
           _scenario("chunked prefill: Sarathi, chunk 512, long prompts", cluster=_ONE_REPLICA,
                     scheduler={"type": "sarathi", "chunk_size": 512}, workload=_LONG_PROMPTS)),
    Preset("Pipeline bubbles at PP=4",
           "Llama-2-70B over 4 pipeline stages at low load: a replica keeps at most 4 batches in "
           "flight and a small batch leaves stages idle while it crosses the others.",
           "Pipeline: gaps on the stage rows are bubbles; Memory: weights per stage.",
           _scenario("pipeline bubbles: Llama-2-70B, PP=4", model="llama-2-70b",
                     cluster={"num_replicas": 1, "pipeline_parallel_size": 4},
                     workload={"num_requests": 80, "arrival": {"process": "poisson", "qps": 1.0}})),
    Preset("Round robin under skew",
           "Bursty arrivals with widely spread lengths and 1,024 KV blocks per replica: round robin "
           "deals requests out blindly, so one replica's queue grows while another's drains.",
           "Overview: per-replica load and queue lengths; then switch to the LOR preset.",
           _scenario("skew: 4 replicas, round robin", cluster={"num_replicas": 4, "pipeline_parallel_size": 1,
                                                              "global_scheduler": "round_robin"},
                     scheduler=_SKEW_REPLICAS, workload=_SKEWED)),
    Preset("Least outstanding requests under skew",
           "The same workload routed to the replica with the fewest waiting requests.",
           "Overview: queue lengths stay level and the TTFT tail shrinks by about a third.",
           _scenario("skew: 4 replicas, LOR", cluster={"num_replicas": 4, "pipeline_parallel_size": 1,
                                                       "global_scheduler": "lor"},
                     scheduler=_SKEW_REPLICAS, workload=_SKEWED)),
    Preset("Colocated prefill and decode (baseline for P/D)",
           "Two vLLM replicas that each run prompts and decodes: every long prompt pauses the decodes "
           "of its replica. Same GPUs and workload as the next preset.",
           "Overview: the TBT p99 (a prompt's whole prefill lands between two tokens); then load the P/D preset.",
           _scenario("colocated: 2 vLLM replicas, long prompts", cluster=_TWO_REPLICAS, scheduler={"type": "vllm"},
                     workload=_LONG_PROMPTS)),
    Preset("P/D disaggregation removes prefill interference",
           "DistServe/Splitwise-style prefill/decode disaggregation as vLLM and SGLang deploy it (PD): one "
           "replica only runs prompts, one only decodes; each prompt's KV cache moves over a 50 GB/s link. "
           "No decode waits for a prompt any more (TBT p99 falls about 5x), at the price of the transfer "
           "and of one replica doing all the prompts (TTFT tail grows).",
           "Overview: TBT p99 against the colocated preset; Pipeline: the KV link row under the prefill "
           "replica; summary: prefill_/decode_/transfer_ figures.",
           _scenario("P/D: 1 prefill + 1 decode replica, 50 GB/s link", cluster=_TWO_REPLICAS,
                     scheduler={"type": "vllm"}, workload=_LONG_PROMPTS, disaggregation=_PD)),
    Preset("Multi-turn chat, open loop",
           "Conversations whose turns arrive at times fixed in advance (answer estimated at 20 ms a "
           "token, then 2 s of thinking). When the server falls behind, the next turn arrives before "
           "the previous answer: queues and TTFT explode. Same workload as the next preset.",
           "Requests: turns of one session overlap; Overview: TTFT tail of many seconds.",
           _scenario("sessions, open loop: 1 vLLM replica", cluster=_ONE_REPLICA, scheduler={"type": "vllm"},
                     workload=_CHATS)),
    Preset("Agentic sessions, closed loop",
           "Agentic / multi-turn sessions: each turn (a tool call's result or the user's reply) arrives "
           "2 s after the simulated answer to the previous one, and its prompt carries the whole context "
           "so far. A session never has two requests in flight, so load regulates itself and the "
           "simulator jumps over the idle pauses.",
           "Requests: each session's turns follow one another; Overview: TTFT against the open-loop preset.",
           _scenario("agentic sessions, closed loop: 1 vLLM replica", cluster=_ONE_REPLICA, scheduler={"type": "vllm"},
                     workload=_merge(_CHATS, {"sessions": {"closed_loop": True}}))),
    Preset("Swap preemption under tight KV (vLLM v0.6, V0 engine)",
           "vLLM's V0 scheduler with 1,024 KV blocks and preemption_mode swap: when decodes outgrow the "
           "cache the newest running request's KV is copied to CPU over PCIe, and copied back (swapped "
           "requests come back before any new prompt is admitted). Nothing is computed twice; the copies "
           "cost about 1.6 s in all. Same workload as the next preset.",
           "Pipeline: the KV-copy lane under the stage row (swap out red, swap in green); Requests: "
           "num_swaps; Overview: compare E2E with the recompute preset.",
           _scenario("swap: vLLM v0, 1,024 KV blocks", cluster=_ONE_REPLICA,
                     scheduler={"type": "vllm_v0", "num_blocks": 1024, "preemption_mode": "swap"},
                     workload=_TIGHT_KV)),
    Preset("Recompute preemption under tight KV (vLLM v0.6, V0 engine)",
           "The same run with preemption_mode recompute (vLLM's default for single samples): a preempted "
           "request drops its KV and later prefills its prompt and everything it generated again, "
           "about 43,000 more prompt tokens than with swap, and a slower E2E.",
           "KV cache: red x marks (restarts); Requests: num_restarts; Pipeline: long re-prefill bars.",
           _scenario("recompute: vLLM v0, 1,024 KV blocks", cluster=_ONE_REPLICA,
                     scheduler={"type": "vllm_v0", "num_blocks": 1024, "preemption_mode": "recompute"},
                     workload=_TIGHT_KV)),
)


_SYSTEM_PROMPTS = {"num_requests": 300, "arrival": {"process": "poisson", "qps": 6.0},
                   "prompt_tokens": {"distribution": "uniform", "min": 64, "max": 256},
                   "output_tokens": {"distribution": "uniform", "min": 32, "max": 256},
                   "shared_prefix": {"tokens": 1536, "num_groups": 4}}
_CHAT = {"num_requests": 300, "arrival": {"process": "poisson", "qps": 1.0},
         "prompt_tokens": {"distribution": "uniform", "min": 32, "max": 256},
         "output_tokens": {"distribution": "uniform", "min": 32, "max": 256},
         "sessions": {"enabled": True, "min_turns": 2, "max_turns": 8, "think_time_s": 3.0,
                      "system_prompt_tokens": 512, "num_system_prompts": 2}}

PRESETS += (
    Preset("vLLM V1 engine (v0.33): one token budget",
           "vllm_v1 gives every running request its token first (a decode needs 1) and spends the rest "
           "of max_num_batched_tokens (2,048) on prompt chunks: no decode waits for a whole prompt. "
           "Same workload as \"Full prefill stalls decodes (vLLM)\", the v0-style prefill-first policy.",
           "Overview: compare the worst-TBT CDF with the vLLM preset; Pipeline: mixed bars.",
           _scenario("vLLM V1: unified token budget, long prompts", cluster=_ONE_REPLICA,
                     scheduler={"type": "vllm_v1", "enable_prefix_caching": False}, workload=_LONG_PROMPTS)),
    Preset("vLLM V1 engine (v0.33): prefix caching of system prompts",
           "Every prompt starts with one of 4 system prompts of 1,536 tokens. vllm_v1 hashes full KV "
           "blocks and keeps them after they are freed, so a prompt computes only what follows its "
           "cached prefix: most prompt tokens are never computed.",
           "Overview: prefix hit rate and TTFT; turn enable_prefix_caching off to compare; KV cache: "
           "shared blocks and cached-but-free blocks.",
           _scenario("vLLM V1: prefix caching, shared system prompts", cluster=_ONE_REPLICA,
                     scheduler={"type": "vllm_v1"}, workload=_SYSTEM_PROMPTS)),
    Preset("SGLang (v0.4): radix cache on multi-turn chat",
           "Each turn of a conversation resends the whole conversation so far. SGLang's radix tree keeps "
           "every finished turn (prompt and answer), so the next turn only computes its new input; "
           "decode batches are padded to CUDA-graph sizes and CPU work overlaps the GPU.",
           "Overview: prefix hit rate; KV cache: shared and cached blocks; Pipeline: hatched (padded) "
           "decode bars.",
           _scenario("SGLang: radix cache, multi-turn chat", cluster=_ONE_REPLICA, max_model_len=8192,
                     scheduler={"type": "sglang"}, workload=_CHAT)),
    Preset("vLLM V1 engine (v0.33): P/D with prefix caches on both pools",
           "Agentic multi-turn sessions (closed loop) on one prefill and one decode replica, as vLLM "
           "deploys P/D with a KV connector. Each turn resends the conversation: the prefill replica's "
           "cache computes only the new input, and the decode replica, which still holds the earlier "
           "turns' blocks, pulls only the blocks it lacks over the link.",
           "Pipeline: short transfers on the KV-link row; transfers.csv: num_tokens against the prompt; "
           "Overview: prefix hit rate.",
           _scenario("vLLM V1 P/D: prefix caches on both pools, agentic sessions", cluster=_TWO_REPLICAS,
                     max_model_len=8192, scheduler={"type": "vllm_v1"}, disaggregation=_PD,
                     workload=_merge(_CHAT, {"sessions": {"closed_loop": True}}))),
)


def preset(name: str) -> Preset:
    """The preset called `name` (KeyError if none)."""
    for item in PRESETS:
        if item.name == name:
            return item
    raise KeyError(name)
