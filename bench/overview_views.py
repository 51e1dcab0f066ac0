"""CPU time of each view the Overview page builds from a new run (what a knob step costs the
server besides the simulation).

    python bench/overview_views.py [--requests 1000 20000] [--repeats 7]

The scenario is the app's default (`sim_core.scenarios.defaults.DEFAULT_SCENARIO`) with more
requests, simulated once per size at `record: series` (as the Overview runs it). Prints each
view builder's median process CPU milliseconds over --repeats calls, and for the per-replica
load both ways: its chart and its table each computing the table (`replica_load_figure` +
`replica_load`, the page before 2026-11-25) and the one view the page caches now
(`replica_load_views`), the two alternating.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim_core import parse_config, run_simulation  # noqa: E402
from sim_core.results.overload import queue_trend  # noqa: E402
from sim_core.results.result import SimulationResult  # noqa: E402
from sim_core.scenarios.defaults import DEFAULT_SCENARIO  # noqa: E402
from sim_core.viz import overview  # noqa: E402

VIEWS: dict[str, Callable[[SimulationResult], object]] = {
    "latency CDFs": overview.run_latency_cdfs,
    "throughput": overview.throughput_figure,
    "queues": overview.queue_figure,
    "over-capacity trend": queue_trend,
    "load: chart + table": lambda run: (overview.replica_load_figure(run), overview.replica_load(run)),
    "load: one view": overview.replica_load_views,
}


def cpu_ms(build: Callable[[SimulationResult], object], run: SimulationResult) -> float:
    """Process CPU milliseconds of one `build(run)`."""
    started = time.process_time()
    build(run)
    return (time.process_time() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, nargs="+", default=[1000, 20000])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    for size in args.requests:
        data = copy.deepcopy(DEFAULT_SCENARIO)
        data["workload"]["num_requests"] = size
        config = parse_config(data)
        config = config.model_copy(update={"engine": config.engine.model_copy(update={"record": "series"})})
        run = run_simulation(config)
        times: dict[str, list[float]] = {name: [] for name in VIEWS}
        for _ in range(args.repeats):          # every view once a round: the load's two ways alternate
            for name, build in VIEWS.items():
                times[name].append(cpu_ms(build, run))
        for name, values in times.items():
            print(f"{size:>7} requests  {name:<22} {statistics.median(values):7.1f} CPU-ms", flush=True)


if __name__ == "__main__":
    main()
