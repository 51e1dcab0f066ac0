"""Latency of a MoE replica whose attention-DP ranks step together, under two routers.

    python bench/dp_lockstep.py [QPS ...]      (default: 8 20)

Mixtral-8x7B on H100-SXM, TP 2 x DP 4 x EP 8, roofline, vllm_v1 defaults; 2,000 requests,
Poisson at each QPS, prompts lognormal (mean 800, sigma 1.2, in [32, 8000]), outputs uniform in
[16, 512], seed 1. Prints TTFT and TPOT medians and p99s, the median end-to-end latency, the
makespan and the CPU seconds of the run. Run on a commit before engine/dp_group.py existed, the
same script gives the independent ranks of the earlier model (docs/design/moe-parallelism.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim_core import parse_config, run_simulation  # noqa: E402


def scenario(qps: float, router: str) -> dict:
    return {"model": "mixtral-8x7b", "device": "h100-sxm", "predictor": {"type": "roofline"}, "seed": 1,
            "cluster": {"tensor_parallel_size": 2, "data_parallel_size": 4, "expert_parallel_size": 8,
                        "global_scheduler": router},
            "workload": {"num_requests": 2000, "arrival": {"process": "poisson", "qps": qps},
                         "prompt_tokens": {"distribution": "lognormal", "min": 32, "max": 8000, "mean": 800,
                                           "sigma": 1.2},
                         "output_tokens": {"distribution": "uniform", "min": 16, "max": 512}}}


def main(rates: list[float]) -> None:
    for qps in rates:
        for router in ("round_robin", "least_outstanding"):
            start = time.process_time()
            result = run_simulation(parse_config(scenario(qps, router)))
            cpu = time.process_time() - start
            done = result.requests[result.requests["status"] == "finished"]
            print(f"qps {qps:5.1f} {router:18s} ttft p50 {done.ttft.median() * 1e3:6.1f} "
                  f"p99 {done.ttft.quantile(.99) * 1e3:6.1f} ms  tpot p50 {done.tpot.median() * 1e3:6.2f} "
                  f"p99 {done.tpot.quantile(.99) * 1e3:6.2f} ms  e2e p50 {done.e2e.median():5.2f} s  "
                  f"makespan {done.completed_at.max():6.1f} s  cpu {cpu:4.1f} s")


if __name__ == "__main__":
    main([float(a) for a in sys.argv[1:]] or [8.0, 20.0])
