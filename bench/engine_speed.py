"""Speed of every engine scheduler against vllm on the same chat trace.

    python bench/engine_speed.py [--requests 10000] [--qps 2] [--repeats 3] [--cases vllm_v1,sglang] [--stepwise]

Workload and model as bench/sim_speed.py (Poisson chat trace, prompts 64..1536, outputs
16..768, Llama-2-7B on an 80 GB A100, Vidur's planner: 7424 blocks of 16, linear cost 5 ms +
0.1 ms per token), plus a multi-turn chat case with a 512-token system prompt where prefix
caching has something to find. Fast-forward applies to vllm, to vllm_v1 (async scheduling,
its default, or serial; with or without prefix caching) and to sglang (with or without its radix
cache). Prints the median CPU seconds of the repeats (time.process_time), their ratio to vllm's on
the same workload, the fastest repeat and its ratio (on a machine other jobs load, CPU seconds
still grow with the contention: the fastest repeat is the steadier figure), batches per second
and the prefix hit rate; `--cases` keeps the cases whose name contains one of its comma-separated words
(substrings: `vllm` keeps every vllm case, `vllm_v0` only that one; the ratio needs the `vllm`
case). lightllm runs with 1-token blocks, which it requires. The `PP 2` cases run the policy on
two pipeline stages (faster_transformer's static batches are fast-forwarded in pipeline runs,
vllm's PP 2 runs stepwise); `--stepwise` turns fast-forward off in every case.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim_core import parse_config, run_simulation  # noqa: E402

BASE = {"model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 4096, "seed": 0,
        "predictor": {"type": "linear", "base_s": 0.005, "per_token_s": 0.0001},
        "memory": {"planner": "vidur"}, "engine": {"record": "batches"}}
CASES = {
    "vllm": {"type": "vllm"},
    "vllm_v1, no prefix caching": {"type": "vllm_v1", "enable_prefix_caching": False},
    "vllm_v1, prefix caching": {"type": "vllm_v1"},
    "vllm_v1 serial, no caching": {"type": "vllm_v1", "enable_prefix_caching": False, "async_scheduling": False},
    "vllm_v1 serial, caching": {"type": "vllm_v1", "async_scheduling": False},
    "sglang, radix cache": {"type": "sglang"},
    "sglang, no radix cache": {"type": "sglang", "enable_prefix_caching": False},
    "sarathi": {"type": "sarathi"},
    "orca": {"type": "orca"},
    "faster_transformer": {"type": "faster_transformer"},
    "lightllm (token blocks)": {"type": "lightllm", "block_size": 1},
    "vllm_v0": {"type": "vllm_v0"},
    "faster_transformer, PP 2": {"type": "faster_transformer"},
    "vllm, PP 2": {"type": "vllm"},
}
STAGES = {"faster_transformer, PP 2": 2, "vllm, PP 2": 2}   # pipeline stages of a case (default 1)


def workloads(num_requests: int, qps: float) -> dict:
    lengths = {"prompt_tokens": {"distribution": "uniform", "min": 64, "max": 1536},
               "output_tokens": {"distribution": "uniform", "min": 16, "max": 768}}
    chat = {"prompt_tokens": {"distribution": "uniform", "min": 32, "max": 256},
            "output_tokens": {"distribution": "uniform", "min": 32, "max": 256},
            "sessions": {"enabled": True, "min_turns": 2, "max_turns": 6, "think_time_s": 5.0,
                         "system_prompt_tokens": 512, "num_system_prompts": 4}}
    arrival = {"num_requests": num_requests, "arrival": {"process": "poisson", "qps": qps}}
    return {"single turns": {**arrival, **lengths}, "multi-turn chat": {**arrival, **chat}}


def timed(config) -> tuple[float, dict]:
    start = time.process_time()
    result = run_simulation(config)
    return time.process_time() - start, result.summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--qps", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", default="", help="comma-separated words: only the cases whose name contains one")
    parser.add_argument("--stepwise", action="store_true", help="fast-forward off (engine.fast_forward: false)")
    args = parser.parse_args()
    engine = {**BASE["engine"], "fast_forward": not args.stepwise}
    words = [word.strip() for word in args.cases.split(",") if word.strip()]
    print(f"{'workload':16s} {'case':28s} {'seconds':>8s} {'x vllm':>7s} {'fastest':>8s} {'x vllm':>7s} "
          f"{'batches/s':>10s} {'hit rate':>9s}")
    for label, workload in workloads(args.requests, args.qps).items():
        baseline = fastest_baseline = None   # vllm's seconds on this workload, when its case runs (it comes first)
        for name, scheduler in CASES.items():
            if words and not any(word in name for word in words):
                continue
            config = parse_config({**BASE, "engine": engine, "scheduler": scheduler, "workload": workload,
                                   "cluster": {"pipeline_parallel_size": STAGES.get(name, 1)}})
            runs = [timed(config) for _ in range(args.repeats)]
            seconds = statistics.median(cpu for cpu, _ in runs)
            fastest = min(cpu for cpu, _ in runs)
            summary = runs[0][1]
            if name == "vllm":
                baseline, fastest_baseline = seconds, fastest
            ratio = f"{seconds / baseline:7.2f}" if baseline else f"{'-':>7s}"
            fastest_ratio = f"{fastest / fastest_baseline:7.2f}" if fastest_baseline else f"{'-':>7s}"
            print(f"{label:16s} {name:28s} {seconds:8.2f} {ratio} {fastest:8.2f} {fastest_ratio} "
                  f"{summary['num_batches'] / seconds:10.0f} {summary['prefix_hit_rate']:9.1%}")


if __name__ == "__main__":
    main()
