"""CPU time of the app's default scenario at each record level (what a knob change in the app simulates).

    python bench/record_cost.py [--requests 1000 20000] [--levels requests batches full] [--repeats 3]
                                [--root DIR] [--parts] [--pause-collector] [--hold N] [--interleave]
                                [--collections]

The scenario is `sim_core.scenarios.defaults.DEFAULT_SCENARIO` (Llama-2-13B on A100-40GB, 2
replicas, vllm, roofline, Poisson 5 req/s) with more requests; the app runs it at `series` for
the Overview, at `batches` for the Pipeline page and at `full` for the KV cache and Requests
pages (`--levels series` needs a checkout that has that level). Prints the
median and minimum process CPU seconds of `run_simulation` over --repeats runs; `--parts` adds
how much of the median run went to building the result (`build_result`: joining, sorting and
summarising the records). `--root` imports sim_core from another checkout (e.g. an unchanged
copy, for before/after figures). `--pause-collector` runs with Python's cyclic garbage collector
paused, as the app did before `run_simulation` paused it itself (`sim_core/engine/collector.py`:
since then every run is paused, with or without the flag, unless `--root` names an older copy);
`--hold N` keeps the results of N earlier runs alive meanwhile, as the app's run cache does (the
collector's walks grow with what is held). `--interleave` runs the levels in turn, one run of
each per round, so that a load that drifts on a shared machine touches every level alike (the
held runs are then of the first level). `--collections` adds the CPU seconds the cyclic collector
spent inside each timed run (`gc.callbacks`; with the collector paused by `run_simulation`,
the collection when it resumes at the run's end).
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, nargs="+", default=[1000, 20000])
    parser.add_argument("--levels", nargs="+", default=["requests", "batches", "full"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--parts", action="store_true", help="also time build_result")
    parser.add_argument("--pause-collector", action="store_true", help="gc.disable() during each run, as the app")
    parser.add_argument("--hold", type=int, default=0, help="results of earlier runs kept alive meanwhile")
    parser.add_argument("--collections", action="store_true",
                        help="also the CPU seconds Python's cyclic collector spent inside each timed run")
    parser.add_argument("--interleave", action="store_true",
                        help="run the levels in turn, one run each per round (--hold: runs of the first level)")
    args = parser.parse_args()
    sys.path.insert(0, args.root)
    import sim_core.engine.simulation as simulation
    from sim_core import parse_config, run_simulation
    from sim_core.scenarios.defaults import DEFAULT_SCENARIO
    from sim_core.workload import build_workload

    building = [0.0]
    if args.parts:
        build = simulation.build_result

        def timed_build(*positional, **named):
            started = time.process_time()
            try:
                return build(*positional, **named)
            finally:
                building[0] += time.process_time() - started
        simulation.build_result = timed_build
    collecting = [0.0, 0.0]   # CPU seconds in collections, when the current one started

    def on_collection(phase: str, info: dict) -> None:
        if phase == "start":
            collecting[1] = time.process_time()
        else:
            collecting[0] += time.process_time() - collecting[1]
    if args.collections:
        gc.callbacks.append(on_collection)
    collector = "paused" if args.pause_collector else "running"
    order = "levels interleaved" if args.interleave else "one level after another"
    print(f"sim_core from {args.root}; median of {args.repeats}; collector {collector}; {args.hold} results held; "
          f"{order}")
    print(f"{'requests':>8s} {'level':>9s} {'median cpu s':>12s} {'min cpu s':>10s} {'build_result s':>14s}"
          + (f" {'collections s':>13s}" if args.collections else ""))
    for num_requests in args.requests:
        configs = {}
        for level in args.levels:
            data = copy.deepcopy(DEFAULT_SCENARIO)
            data["workload"]["num_requests"] = num_requests
            data["engine"]["record"] = level
            configs[level] = parse_config(data)
        workload = build_workload(configs[args.levels[0]])   # the record level changes no request

        def timed(config, workload) -> tuple[float, float, float]:
            """CPU seconds of one run, of its build_result and of the collections inside it."""
            building[0] = collecting[0] = 0.0
            if args.pause_collector:
                gc.disable()
            started = time.process_time()
            run_simulation(config, workload)
            elapsed = time.process_time() - started
            gc.enable()
            return elapsed, building[0], collecting[0]

        if args.interleave:   # each round runs every level once: load that drifts touches them alike
            held = [run_simulation(configs[args.levels[0]], workload) for _ in range(args.hold)]
            samples = {level: [] for level in args.levels}
            for _ in range(args.repeats):
                for level in args.levels:
                    samples[level].append(timed(configs[level], workload))
            del held
        else:
            samples = {}
            for level in args.levels:
                held = [run_simulation(configs[level], workload) for _ in range(args.hold)]
                samples[level] = [timed(configs[level], workload) for _ in range(args.repeats)]
                del held
        for level in args.levels:
            times, builds, collections = zip(*samples[level])
            parts = f"{statistics.median(builds):14.3f}" if args.parts else f"{'':>14s}"
            collected = f" {statistics.median(collections):13.3f}" if args.collections else ""
            print(f"{num_requests:8d} {level:>9s} {statistics.median(times):12.3f} {min(times):10.3f} {parts}"
                  f"{collected}", flush=True)


if __name__ == "__main__":
    main()
