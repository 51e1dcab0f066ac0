"""Capacity-search accuracy: the search's answer against long steady-state runs, and its scaling
with replicas under least_outstanding (figures printed, not asserted).

    python bench/capacity_accuracy.py [--long-requests 10000] [--replicas 1 2 4] [--workloads conversation chat code]
        [--seeds 42 1 2 3 4 5] [--steady chat:1=4.66 ...]

Scenario: Llama-2-7B on an A100-80GB, roofline predictor, vLLM (Vidur's), SLOs TTFT p90 <= 2 s
and TBT p99 <= 0.2 s, search 0.25 .. 256 req/s at 5% tolerance with 400 requests per replica.
Workloads: `conversation` (Poisson arrivals, Splitwise-conversation-like lengths: lognormal
prompts of mean 1,155 tokens and outputs of mean 211, clipped to 4,096 in all), and the
`sample_traces/chat.csv` and `code.csv` traces (resampled to each run's length).

For each workload and replica count it prints the search's answer with its range, then judges
long runs (`--long-requests` per replica) at 0.9x, 1.0x and 1.1x the answer with the probe's
own steady-state judgement (window, overload test, SLOs): the issue's target is a pass at 0.9x
and a fail at 1.1x (the answer within 5%-10% of the steady-state capacity), 1.0x borderline.
Scaling: the answer at N replicas over N x the answer at 1.

`--seeds` searches each point once per scenario seed (`seed`; 42 is the default point's) and
`--long-requests 0` skips the long runs; `--steady workload:replicas=req/s` gives a steady-state
capacity measured by long runs, against which each answer's error and the mean absolute error
over the seeds are printed. Each search also prints the requests it simulated, in units of one
replica's `num_requests` (a long probe counts `confirm_length`), and the run ends with their total.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim_core import parse_config  # noqa: E402
from sim_core.sweep import SearchSettings, capacity_search  # noqa: E402
from sim_core.sweep.probe import run_probe  # noqa: E402
from sim_core.sweep.search import Capacity  # noqa: E402

SLO = {"ttft_p90_s": 2.0, "tbt_p99_s": 0.2}
SEARCH = SearchSettings(qps_min=0.25, qps_max=256.0, num_requests=400, tolerance=0.05)
WORKLOADS = {
    "conversation": {"arrival": {"process": "poisson", "qps": 1.0},
                     "prompt_tokens": {"distribution": "lognormal", "mean": 1155, "sigma": 1.0, "min": 16,
                                       "max": 3584},
                     "output_tokens": {"distribution": "lognormal", "mean": 211, "sigma": 1.0, "min": 4,
                                       "max": 512}},
    "chat": {"trace_file": str(ROOT / "sample_traces" / "chat.csv")},
    "code": {"trace_file": str(ROOT / "sample_traces" / "code.csv")},
}


def scenario(workload: str, num_replicas: int) -> dict:
    return parse_config({
        "model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 4096, "predictor": {"type": "roofline"},
        "scheduler": {"type": "vllm"},
        "cluster": {"num_replicas": num_replicas, "global_scheduler": "least_outstanding"},
        "workload": WORKLOADS[workload]}).model_dump(mode="json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long-requests", type=int, default=10_000, help="requests per replica of a long run")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[42], help="scenario seeds searched")
    parser.add_argument("--steady", nargs="*", default=[], metavar="WORKLOAD:REPLICAS=QPS",
                        help="steady-state capacities to print each answer's error against")
    args = parser.parse_args()
    steady = {key: float(value) for key, value in (item.split("=") for item in args.steady)}
    units = 0
    for workload in args.workloads:
        answers = {}
        for num_replicas in args.replicas:
            errors = []
            for seed in args.seeds:
                point = {**scenario(workload, num_replicas), "seed": seed}
                found, used = search(workload, point, seed)
                units += used
                answers.setdefault(num_replicas, found.max_qps)
                reference = steady.get(f"{workload}:{num_replicas}")
                if reference:
                    errors.append(found.max_qps / reference - 1.0)
                    print(f"    error against the steady state {reference:g}: {errors[-1]:+.1%}", flush=True)
                if args.long_requests:
                    long_runs(point, found.max_qps, args.long_requests, num_replicas)
            if errors:
                mean = sum(map(abs, errors)) / len(errors)
                print(f"{workload:12s} {num_replicas} replica(s): mean absolute error {mean:.1%}, "
                      f"from {min(errors):+.1%} to {max(errors):+.1%} over seeds {args.seeds}", flush=True)
        one = answers.get(1)
        if one:
            print(f"{workload:12s} scaling: " + ", ".join(f"{n} -> {answers[n] / (n * one):.3f} of linear"
                                                       for n in args.replicas if n > 1), flush=True)
    print(f"requests simulated by the searches: {units} x {SEARCH.num_requests} (one replica's short probe)")


def search(workload: str, point: dict, seed: int) -> tuple[Capacity, int]:
    """The search's answer for `point`, printed, and the requests it simulated in units of one
    replica's short probe."""
    started = time.perf_counter()
    found = capacity_search(point, SLO, SEARCH)
    searched = time.perf_counter() - started
    num_replicas = point["cluster"]["num_replicas"]
    used = num_replicas * sum(probe.length for probe in found.probes)
    low, high = found.qps_range
    print(f"{workload:12s} {num_replicas} replica(s), seed {seed}: {found.max_qps:7.3f} req/s "
          f"(range {low:.3f} .. {high if high is None else round(high, 3)}, binding {found.binding_slo}, "
          f"{len(found.probes)} probes, {used} x {SEARCH.num_requests} requests, {searched:.1f} s)", flush=True)
    return found, used


def long_runs(point: dict, answer: float, long_requests: int, num_replicas: int) -> None:
    """Judge runs of `long_requests` per replica at 0.9x, 1.0x and 1.1x the answer, printed."""
    long = SEARCH.model_copy(update={"num_requests": long_requests})
    for factor in (0.9, 1.0, 1.1):
        started = time.perf_counter()
        verdict = run_probe(point, factor * answer, SLO, long)
        metrics = verdict.metrics
        print(f"    long run at {factor:.1f}x ({factor * answer:.3f} req/s, "
              f"{long_requests * num_replicas} requests): {'pass' if verdict.passed else 'FAIL'} "
              f"{', '.join(verdict.violated)}; TTFT p90 {metrics.get('ttft_p90_s')}, "
              f"TBT p99 {metrics.get('tbt_p99_s')}, backlog growth {metrics.get('backlog_growth')} "
              f"({time.perf_counter() - started:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
