"""Simulate and write every output: CPU seconds of the run and of each file it writes.

    python bench/output_speed.py [--requests 10000] [--repeats 3] [--cases abc] [--trace FILE] [--gzip] [--parquet]

The case of issue 20: a Splitwise-conversation-like trace (Poisson 1.6 req/s; prompts lognormal
around 1,020 tokens, outputs lognormal around 130, the medians of Azure's 2023 conversation trace;
written to bench/out/ so any simulator can replay it, or --trace FILE for your own), Llama-2-7B on
an A100-80GB with 7,000 KV blocks of 16 tokens, linear cost 5 ms + 0.1 ms per token, `record: full`
(what the CLI records when it writes outputs). Cases: (a) vllm, 1 replica; (b) sarathi chunk 512,
1 replica; (c) vllm, 4 replicas routed by lor at 4x the rate. For each it prints the median CPU
seconds (time.process_time, so a shared machine does not distort them) of the simulation and of
each output file, and the total. --gzip writes the Chrome trace as chrome_trace.json.gz,
--parquet the tables as Parquet (`run --chrome-trace json.gz`, `run --tables parquet`). Each file is
rendered and written as `run --out` writes it (streamed, in pieces), the batches' request lists
built once for the files that share them (counted in the first of them, batches.csv).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim_core import parse_config, run_simulation  # noqa: E402
from sim_core.export.run_files import OutputFormats, output_files  # noqa: E402
from sim_core.workload import build_workload, write_replay_trace  # noqa: E402

CASES = {
    "a: vllm, 1 replica": ({"type": "vllm"}, 1, "round_robin"),
    "b: sarathi chunk 512": ({"type": "sarathi", "chunk_size": 512}, 1, "round_robin"),
    "c: vllm, 4 replicas, lor": ({"type": "vllm"}, 4, "lor"),
}
QPS = 6.5


def make_trace(num_requests: int, qps: float) -> Path:
    spec = {"seed": 0, "max_model_len": 4096,
            "workload": {"num_requests": num_requests, "arrival": {"process": "poisson", "qps": qps},
                         "prompt_tokens": {"distribution": "lognormal", "mean": 1020, "sigma": 0.9, "min": 8,
                                           "max": 3584},
                         "output_tokens": {"distribution": "lognormal", "mean": 130, "sigma": 1.0, "min": 2,
                                           "max": 500}}}
    path = ROOT / "bench" / "out" / f"conversation_{num_requests}_qps{qps:g}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_replay_trace(build_workload(parse_config(spec)), path)
    return path


def scenario(trace: Path, case: tuple):
    scheduler, replicas, router = case
    return parse_config({
        "model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 4096,
        "predictor": {"type": "linear", "base_s": 0.005, "per_token_s": 0.0001},
        "scheduler": {**scheduler, "num_blocks": 7000}, "engine": {"record": "batches"},
        "cluster": {"num_replicas": replicas, "global_scheduler": router},
        "workload": {"trace_file": str(trace)}})


def timed_run(config, formats: OutputFormats) -> dict[str, float]:
    """CPU seconds of the simulation and of rendering each output file to disk."""
    seconds = {}
    start = time.process_time()
    result = run_simulation(config)
    seconds["simulate"] = time.process_time() - start
    seconds["_batches"] = float(result.summary["num_batches"])
    with tempfile.TemporaryDirectory() as folder:
        for name, render in output_files(result, formats).items():
            start = time.process_time()
            with open(Path(folder, name), "wb") as file:
                for piece in render():
                    file.write(piece)
            seconds[name] = time.process_time() - start
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", default="", help="letters of the cases to run (default: all)")
    parser.add_argument("--trace", type=Path, help="a replay trace to use instead of the generated one")
    parser.add_argument("--gzip", action="store_true", help="write chrome_trace.json.gz")
    parser.add_argument("--parquet", action="store_true", help="write the tables as Parquet")
    args = parser.parse_args()
    formats = OutputFormats("parquet" if args.parquet else "csv", "json.gz" if args.gzip else "json")
    for name, case in CASES.items():
        if args.cases and name[0] not in args.cases:
            continue
        qps = QPS * case[1]
        trace = args.trace or make_trace(args.requests, qps)
        runs = [timed_run(scenario(trace, case), formats) for _ in range(args.repeats)]
        medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        total = sum(value for key, value in medians.items() if not key.startswith("_"))
        print(f"\n{name} ({trace.name}, {int(medians['_batches']):,} batches); median CPU s of {args.repeats}")
        for key, value in medians.items():
            if not key.startswith("_"):
                print(f"  {key:22s} {value:7.3f}")
        print(f"  {'total':22s} {total:7.3f}")


if __name__ == "__main__":
    main()
