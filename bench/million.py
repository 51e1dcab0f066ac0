"""A million-request trace: load time, simulation time on 16 replicas, peak memory.

    python bench/million.py [--requests 1000000] [--simulate N] [--repeats 3] [--router lor]

Writes a chat-like trace of --requests rows to bench/out/ (Poisson 32 req/s, prompts uniform
64..1536, outputs uniform 16..768; made by our generator), times reading it (median of
--repeats, the trace reader alone and the whole build_workload), then simulates its first
--simulate requests: vllm, Llama-2-7B on 16 x A100-80GB routed by --router (default
round_robin, Vidur's default), linear cost 5 ms + 0.1 ms per token, engine.record = requests
(per-request columns and the summary only). Prints wall and CPU times, simulated requests per
second and the peak resident memory of the process.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# sim_core is importable only after ROOT is on sys.path (the script runs as `python bench/million.py`)
from sim_core import parse_config, run_simulation  # noqa: E402
from sim_core.workload import build_workload, read_trace, write_trace  # noqa: E402

SCENARIO = {"seed": 0, "model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 4096,
            "predictor": {"type": "linear", "base_s": 0.005, "per_token_s": 0.0001},
            "memory": {"planner": "vidur"}, "engine": {"record": "requests"}, "scheduler": {"type": "vllm"},
            "cluster": {"num_replicas": 16, "global_scheduler": "lor"}}


def make_trace(num_requests: int) -> Path:
    path = ROOT / "bench" / "out" / f"million_{num_requests}.csv"
    if not path.exists():
        spec = {**SCENARIO, "workload": {
            "num_requests": num_requests, "arrival": {"process": "poisson", "qps": 32.0},
            "prompt_tokens": {"distribution": "uniform", "min": 64, "max": 1536},
            "output_tokens": {"distribution": "uniform", "min": 16, "max": 768}}}
        write_trace(build_workload(parse_config(spec)), path)
    return path


def foreign_copies(trace: Path) -> dict[str, Path]:
    """The same requests as an Azure CSV (date-times) and Mooncake JSON lines (with hash ids)."""
    out = {"azure": trace.with_suffix(".azure.csv"), "mooncake": trace.with_suffix(".mooncake.jsonl")}
    if all(path.exists() for path in out.values()):
        return out
    w = read_trace(trace).workload
    stamps = pd.Timestamp("2023-11-16 18:15:46") + pd.to_timedelta(w.arrived_at, unit="s")
    pd.DataFrame({"TIMESTAMP": stamps.strftime("%Y-%m-%d %H:%M:%S.%f"), "ContextTokens": w.num_prefill_tokens,
                  "GeneratedTokens": w.num_decode_tokens}).to_csv(out["azure"], index=False)
    with out["mooncake"].open("w") as handle:
        for ms, prompt, output in zip((w.arrived_at * 1000).round().astype(int).tolist(),
                                      w.num_prefill_tokens.tolist(), w.num_decode_tokens.tolist()):
            ids = list(range(-(-prompt // 512)))
            handle.write(json.dumps({"timestamp": ms, "input_length": prompt, "output_length": output,
                                     "hash_ids": ids}) + "\n")
    return out


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--simulate", type=int, default=None, help="simulate only the first N (default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--router", default="round_robin", choices=["round_robin", "lor", "random"])
    parser.add_argument("--formats", action="store_true", help="also time Azure CSV and Mooncake JSONL copies")
    args = parser.parse_args()
    trace = make_trace(args.requests)
    size_mb = trace.stat().st_size / 1e6
    print(f"trace: {trace.relative_to(ROOT)} ({args.requests} rows, {size_mb:.1f} MB); peak RSS so far "
          f"{peak_rss_mb():.0f} MB")
    config = parse_config({**SCENARIO, "cluster": {"num_replicas": 16, "global_scheduler": args.router},
                           "workload": {"trace_file": str(trace), "max_trace_requests": args.simulate or 0}})
    reads = [timed(lambda: read_trace(trace)) for _ in range(args.repeats)]
    builds = [timed(lambda: build_workload(config)) for _ in range(args.repeats)]
    print(f"read_trace: median {statistics.median(reads):.2f} s (min {min(reads):.2f}); build_workload: "
          f"median {statistics.median(builds):.2f} s; peak RSS {peak_rss_mb():.0f} MB")
    if args.formats:
        for fmt, path in foreign_copies(trace).items():
            reads = [timed(lambda path=path: read_trace(path)) for _ in range(args.repeats)]
            print(f"read_trace {fmt} ({path.stat().st_size / 1e6:.0f} MB): median {statistics.median(reads):.2f} s; "
                  f"peak RSS {peak_rss_mb():.0f} MB")
    workload = build_workload(config)
    start, cpu = time.perf_counter(), time.process_time()
    result = run_simulation(config, workload)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    s = result.summary
    print(f"simulate {len(workload)} requests on 16 replicas ({args.router}): {seconds:.1f} s wall, {cpu:.1f} s CPU "
          f"({len(workload) / seconds:.0f} req/s, "
          f"{s['num_batches'] / seconds:.0f} batches/s); {s['num_finished']} finished, makespan "
          f"{s['makespan_s']:.0f} s simulated; peak RSS {peak_rss_mb():.0f} MB")
    if args.simulate and args.simulate < args.requests:
        print(f"extrapolated to {args.requests} requests: {seconds * args.requests / len(workload):.0f} s")


if __name__ == "__main__":
    main()
