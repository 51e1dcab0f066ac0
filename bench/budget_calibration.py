"""The run budget's memory estimate against measured peaks (how sim_core/engine/cost_estimate.py was calibrated).

    python bench/budget_calibration.py [--cases abc...] [--rss]

For each case the scenario is estimated (`estimate_cost`, from the scenario alone, as the
budget check sees it before anything is built), then run with `limits=None` inside
tracemalloc: the measured figure is the peak of traced allocations (Python objects and numpy
buffers) from building the workload to the finished result. Prints both, their ratio, the
request steps (the estimate's upper bound on batches) and the batches the run formed. With
--rss, each case also runs in a fresh process and the growth of its peak resident set
(VmHWM after the run less before it; allocator overhead included) is printed too.

Cases (Llama-2-7B on an 80 GB A100, Vidur's planner, linear cost 5 ms + 0.1 ms per token,
Poisson arrivals, prompts uniform 64..1536, outputs uniform 16..768 unless said otherwise):
light loads (0.05 req/s: every request alone, one batch per output token: the worst case per
step, which the estimate prices) and heavy ones (20 req/s: large batches, over-estimated by
design), at each record level, iteration by iteration and fast-forwarded, for vllm, vllm_v1,
sglang, vllm_v0; 1,024 replicas; many short requests; P/D pools; 10^9 KV blocks; 4 pipeline stages.
The constants in sim_core/engine/cost_estimate.py are rounded up from the largest measured per-item costs;
a ratio (estimated / measured) below 1 on a light-load case means a constant needs raising.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim_core import parse_config, run_simulation  # noqa: E402
from sim_core.engine.budget import estimate_cost  # noqa: E402
from sim_core.workload import build_workload  # noqa: E402

BASE = {"model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 4096, "seed": 0,
        "predictor": {"type": "linear", "base_s": 0.005, "per_token_s": 0.0001}, "memory": {"planner": "vidur"}}
LENGTHS = {"prompt_tokens": {"distribution": "uniform", "min": 64, "max": 1536},
           "output_tokens": {"distribution": "uniform", "min": 16, "max": 768}}


def case(policy: str, record: str, requests: int, qps: float, fast_forward: bool = True, replicas: int = 1,
         **changes) -> dict:
    workload = {"num_requests": requests, "arrival": {"process": "poisson", "qps": qps}, **LENGTHS,
                **changes.pop("workload", {})}
    return {**BASE, "scheduler": {"type": policy, **changes.pop("scheduler", {})},
            "engine": {"record": record, "fast_forward": fast_forward},
            "cluster": changes.pop("cluster", {"num_replicas": replicas}), "workload": workload, **changes}


CASES = {
    "a: vllm stepwise, batches, light": case("vllm", "batches", 600, 0.05, fast_forward=False),
    "b: vllm stepwise, full, light": case("vllm", "full", 600, 0.05, fast_forward=False),
    "c: vllm fast-forward, batches, light": case("vllm", "batches", 1200, 0.05),
    "d: vllm fast-forward, batches, heavy": case("vllm", "batches", 1200, 20.0),
    "e: vllm fast-forward, requests, heavy": case("vllm", "requests", 1200, 20.0),
    "f: vllm_v1 caching, full, light": case("vllm_v1", "full", 600, 0.05),
    "g: vllm_v1 caching, full, heavy": case("vllm_v1", "full", 1200, 20.0),
    "h: sglang radix, full, light": case("sglang", "full", 600, 0.05),
    "i: sglang radix, batches, heavy": case("sglang", "batches", 1200, 20.0),
    "j: vllm_v0 n=2, full, light": case("vllm_v0", "full", 400, 0.05, workload={"parallel_samples": 2}),
    "k: vllm 1,024 replicas, full": case("vllm", "full", 2000, 5.0, replicas=1024,
                                         workload={"output_tokens": {"distribution": "uniform", "min": 16,
                                                                     "max": 64}}),
    "l: vllm 40k short requests, requests": case("vllm", "requests", 40_000, 200.0, replicas=4,
                                                 workload={"output_tokens": {"distribution": "uniform",
                                                                             "min": 4, "max": 8}}),
    "m: vllm P/D pools, full, light": case("vllm", "full", 400, 0.05, disaggregation={
        "enabled": True, "prefill": {"num_replicas": 1}, "decode": {"num_replicas": 2}}),
    "n: vllm 10^9 blocks, full": case("vllm", "full", 200, 2.0, scheduler={"num_blocks": 1_000_000_000}),
    "o: vllm PP=4, batches, light": case("vllm", "batches", 300, 0.05, cluster={"num_replicas": 1,
                                                                               "pipeline_parallel_size": 4}),
}


def measure(spec: dict) -> tuple[object, int, int, float]:
    """(estimate, measured peak bytes, batches formed, CPU seconds) of one scenario."""
    config = parse_config(spec)
    estimate = estimate_cost(config)
    tracemalloc.start()
    started = time.process_time()
    result = run_simulation(config, build_workload(config), limits=None)
    seconds = time.process_time() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return estimate, peak, result.summary["num_batches"], seconds


def rss_growth(letter: str) -> float:
    """MiB the peak resident set grows by while case `letter` runs in a fresh interpreter."""
    code = (f"import sys; sys.argv = ['x', '--cases', '{letter}', '--child']; "
            f"sys.path.insert(0, {str(Path(__file__).parent)!r}); import budget_calibration as b; b.child()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])


def child() -> None:
    """In a fresh process: run one case (no tracemalloc) and print the growth of the peak RSS in MiB
    (VmHWM: ru_maxrss would carry the parent's peak across fork and exec)."""
    spec = next(spec for name, spec in CASES.items() if name[0] == sys.argv[2])
    config = parse_config(spec)
    before = peak_rss_kib()
    run_simulation(config, build_workload(config), limits=None)
    print((peak_rss_kib() - before) / 1024)


def peak_rss_kib() -> int:
    """This process's peak resident set size in KiB (Linux: /proc/self/status VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="", help="letters of the cases to run (default: all)")
    parser.add_argument("--rss", action="store_true", help="also measure the peak RSS growth in a fresh process")
    args = parser.parse_args()
    print(f"{'case':40s} {'estimated MiB':>13s} {'measured MiB':>12s} {'ratio':>6s} {'steps':>9s} "
          f"{'batches':>8s} {'cpu s':>6s}{'  rss MiB' if args.rss else ''}")
    for name, spec in CASES.items():
        if args.cases and name[0] not in args.cases:
            continue
        estimate, measured, batches, seconds = measure(spec)
        estimated = estimate.peak_bytes
        rss = f"{rss_growth(name[0]):9.1f}" if args.rss else ""
        print(f"{name:40s} {estimated / 2**20:13.1f} {measured / 2**20:12.1f} {estimated / measured:6.2f} "
              f"{estimate.num_request_steps:9d} {batches:8d} {seconds:6.1f}{rss}", flush=True)


if __name__ == "__main__":
    main()
