"""Simulator speed: simulated requests and batches per second of wall time.

    python bench/sim_speed.py [--requests 10000] [--repeats 3] [--record batches] [--qps 2 5] [--cases ade]

Cases (the same trace for all, written to bench/out/ so any simulator can replay it):
  (a) vllm, linear cost, 1 replica; (b) the same on 4 replicas routed by lor;
  (c) sarathi with chunk_size 512, 1 replica; (d) vllm_v0, 1 replica; (e) vllm_v0 with 1,024
  KV blocks and swap preemption (memory-bound: many swaps).
Workload: chat-like, Poisson arrivals at each --qps (2 req/s: moderate load, about 6 requests in
flight; 5 req/s: busy, about 30 in flight), prompts uniform 64..1536, outputs uniform 16..768.
Model/KV: Llama-2-7B on an 80 GB A100, max_model_len 4096, Vidur's planner (7424 blocks of 16);
linear cost 5 ms + 0.1 ms per token per iteration. Reports the median of the repeats (these
machines are noisy) and, for reference, one iteration-by-iteration run (fast_forward off).
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
from sim_core.workload import build_workload, write_replay_trace  # noqa: E402

CASES = {
    "a: vllm, 1 replica": {"scheduler": {"type": "vllm"}, "cluster": {"num_replicas": 1}},
    "b: vllm, 4 replicas, lor": {"scheduler": {"type": "vllm"},
                                 "cluster": {"num_replicas": 4, "global_scheduler": "lor"}},
    "c: sarathi chunk 512": {"scheduler": {"type": "sarathi", "chunk_size": 512}, "cluster": {"num_replicas": 1}},
    "d: vllm_v0, 1 replica": {"scheduler": {"type": "vllm_v0"}, "cluster": {"num_replicas": 1}},
    "e: vllm_v0 swap, 1024 blocks": {"scheduler": {"type": "vllm_v0", "num_blocks": 1024, "preemption_mode": "swap"},
                                     "cluster": {"num_replicas": 1}},
}


def make_trace(num_requests: int, qps: float) -> Path:
    spec = {"seed": 0, "max_model_len": 4096,
            "workload": {"num_requests": num_requests, "arrival": {"process": "poisson", "qps": qps},
                         "prompt_tokens": {"distribution": "uniform", "min": 64, "max": 1536},
                         "output_tokens": {"distribution": "uniform", "min": 16, "max": 768}}}
    path = ROOT / "bench" / "out" / f"chat_{num_requests}_qps{qps:g}.csv"
    write_replay_trace(build_workload(parse_config(spec)), path)
    return path


def scenario(trace: Path, case: dict, record: str, fast_forward: bool = True):
    return parse_config({
        "model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 4096,
        "predictor": {"type": "linear", "base_s": 0.005, "per_token_s": 0.0001},
        "memory": {"planner": "vidur"}, "engine": {"record": record, "fast_forward": fast_forward},
        "workload": {"trace_file": str(trace)}, **case})


def timed(config) -> tuple[float, int, int]:
    start = time.perf_counter()
    result = run_simulation(config)
    return time.perf_counter() - start, result.summary["num_batches"], result.summary["num_finished"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--record", default="batches", choices=["full", "batches", "requests"])
    parser.add_argument("--qps", type=float, nargs="+", default=[2.0, 5.0])
    parser.add_argument("--stepwise", action="store_true", help="also time iteration-by-iteration runs")
    parser.add_argument("--cases", default="", help="letters of the cases to run (default: all)")
    args = parser.parse_args()
    for qps in args.qps:
        run_cases(make_trace(args.requests, qps), args)


def run_cases(trace: Path, args) -> None:
    print(f"\ntrace: {trace.relative_to(ROOT)}; record={args.record}; median of {args.repeats}")
    print(f"{'case':28s} {'median s':>9s} {'min s':>7s} {'batches':>8s} {'requests/s':>11s} {'batches/s':>10s}")
    for name, case in CASES.items():
        if args.cases and name[0] not in args.cases:
            continue
        runs = [timed(scenario(trace, case, args.record)) for _ in range(args.repeats)]
        median = statistics.median(r[0] for r in runs)
        batches, finished = runs[0][1], runs[0][2]
        print(f"{name:28s} {median:9.2f} {min(r[0] for r in runs):7.2f} {batches:8d} "
              f"{finished / median:11.0f} {batches / median:10.0f}")
        if args.stepwise:
            seconds, _, _ = timed(scenario(trace, case, args.record, fast_forward=False))
            print(f"{'  iteration by iteration':28s} {seconds:9.2f} {'':7s} {'':8s} {finished / seconds:11.0f} "
                  f"{batches / seconds:10.0f}   fast-forward speed-up x{seconds / median:.1f}")


if __name__ == "__main__":
    main()
