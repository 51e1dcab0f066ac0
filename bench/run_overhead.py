"""CPU time of small runs that stress the block pools and the event loop (budget / lazy-pool overhead).

    python bench/run_overhead.py [--repeats 5] [--root DIR] [--poll] [--cases abcde]

Cases (Llama-2-7B on an 80 GB A100, Vidur's planner: 7424 blocks of 16, linear cost 5 ms +
0.1 ms per token, Poisson arrivals, prompts uniform 64..1536, outputs uniform 16..768, seed 0):
  (a) vllm, fast-forward, record batches, 5,000 requests at 5 req/s (the common CLI case);
  (b) vllm iteration by iteration, record full (block ids tracked), 1,500 requests at 5 req/s;
  (c) vllm_v1 with prefix caching (hashed blocks), multi-turn chat, 1,500 turns at 5 req/s;
  (d) sglang with its radix cache, multi-turn chat, 1,500 turns at 5 req/s;
  (e) vllm_v0 with 2 parallel samples, record full (reference-counted blocks), 1,000 requests at 3 req/s.
Prints the median and minimum process CPU time of --repeats runs (these machines are shared and
noisy: CPU time is steadier than wall time). `--root` imports sim_core from another checkout
(e.g. an unchanged copy, for before/after numbers); `--poll` passes a `should_stop` hook that
never stops (when the checkout's run_simulation accepts one), to measure the polling cost.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import time
from pathlib import Path

BASE = {"model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 4096, "seed": 0,
        "predictor": {"type": "linear", "base_s": 0.005, "per_token_s": 0.0001}, "memory": {"planner": "vidur"}}
LENGTHS = {"prompt_tokens": {"distribution": "uniform", "min": 64, "max": 1536},
           "output_tokens": {"distribution": "uniform", "min": 16, "max": 768}}
CHAT = {"prompt_tokens": {"distribution": "uniform", "min": 32, "max": 256},
        "output_tokens": {"distribution": "uniform", "min": 32, "max": 256},
        "sessions": {"enabled": True, "min_turns": 2, "max_turns": 6, "think_time_s": 5.0,
                     "system_prompt_tokens": 512, "num_system_prompts": 4}}


def _case(scheduler: dict, record: str, requests: int, qps: float, lengths: dict, fast_forward: bool = True,
          **workload) -> dict:
    return {**BASE, "scheduler": scheduler, "engine": {"record": record, "fast_forward": fast_forward},
            "workload": {"num_requests": requests, "arrival": {"process": "poisson", "qps": qps}, **lengths,
                         **workload}}


CASES = {
    "a: vllm fast-forward": _case({"type": "vllm"}, "batches", 5000, 5.0, LENGTHS),
    "b: vllm stepwise, full": _case({"type": "vllm"}, "full", 1500, 5.0, LENGTHS, fast_forward=False),
    "c: vllm_v1 prefix caching": _case({"type": "vllm_v1"}, "full", 1500, 5.0, CHAT),
    "d: sglang radix cache": _case({"type": "sglang"}, "full", 1500, 5.0, CHAT),
    "e: vllm_v0 n=2, full": _case({"type": "vllm_v0"}, "full", 1000, 3.0, LENGTHS, parallel_samples=2),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--poll", action="store_true", help="pass should_stop=lambda: False")
    parser.add_argument("--cases", default="", help="letters of the cases to run (default: all)")
    args = parser.parse_args()
    sys.path.insert(0, args.root)
    from sim_core import parse_config, run_simulation
    from sim_core.workload import build_workload

    extra = {}
    if args.poll and "should_stop" in inspect.signature(run_simulation).parameters:
        extra = {"should_stop": lambda: False}
    print(f"sim_core from {args.root}; hook: {'should_stop' if extra else 'none'}; median of {args.repeats}")
    print(f"{'case':28s} {'median cpu s':>12s} {'min cpu s':>10s} {'batches':>8s}")
    for name, spec in CASES.items():
        if args.cases and name[0] not in args.cases:
            continue
        config = parse_config(spec)
        workload = build_workload(config)
        times, batches = [], 0
        for _ in range(args.repeats):
            start = time.process_time()
            batches = run_simulation(config, workload, **extra).summary["num_batches"]
            times.append(time.process_time() - start)
        print(f"{name:28s} {statistics.median(times):12.3f} {min(times):10.3f} {batches:8d}")


if __name__ == "__main__":
    main()
