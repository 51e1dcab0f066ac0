"""CPU time of the app's default scenario at each record level (what a knob change in the app simulates).

    python bench/record_cost.py [--requests 1000 20000] [--levels requests batches full] [--repeats 3]
                                [--root DIR] [--parts] [--pause-collector] [--hold N]

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
collector's walks grow with what is held).
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
    collector = "paused" if args.pause_collector else "running"
    print(f"sim_core from {args.root}; median of {args.repeats}; collector {collector}; {args.hold} results held")
    print(f"{'requests':>8s} {'level':>9s} {'median cpu s':>12s} {'min cpu s':>10s} {'build_result s':>14s}")
    for num_requests in args.requests:
        for level in args.levels:
            data = copy.deepcopy(DEFAULT_SCENARIO)
            data["workload"]["num_requests"] = num_requests
            data["engine"]["record"] = level
            config = parse_config(data)
            workload = build_workload(config)
            held = [run_simulation(config, workload) for _ in range(args.hold)]
            times, builds = [], []
            for _ in range(args.repeats):
                building[0] = 0.0
                if args.pause_collector:
                    gc.disable()
                started = time.process_time()
                run_simulation(config, workload)
                times.append(time.process_time() - started)
                gc.enable()
                builds.append(building[0])
            del held
            parts = f"{statistics.median(builds):14.3f}" if args.parts else f"{'':>14s}"
            print(f"{num_requests:8d} {level:>9s} {statistics.median(times):12.3f} {min(times):10.3f} {parts}",
                  flush=True)


if __name__ == "__main__":
    main()
