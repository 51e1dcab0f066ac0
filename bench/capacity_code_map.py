"""Map the `code` workload's TBT p99 / TTFT p90 against the arrival rate for 1 and 2 replicas
(2 at twice the rate) under least_outstanding and round_robin, with the probe's own
steady-state judgement: is code's 1 -> 2 replica superlinear scaling (bench/README.md,
"Capacity search accuracy") a search artifact or the routing?

    python bench/capacity_code_map.py [--requests 3000] [--rates 0.5 0.6 0.8 1.0 1.2]
        [--setups 1:least_outstanding 2:random ...] [--workload code]

Rates are per replica: N replicas run at N x the rate.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.capacity_accuracy import SEARCH, SLO, scenario  # noqa: E402
from sim_core.sweep.probe import run_probe  # noqa: E402
from sim_core.sweep.spec import set_path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests per replica of a run")
    parser.add_argument("--rates", type=float, nargs="+", default=[0.5, 0.6, 0.8, 1.0, 1.2],
                        help="per-replica arrival rates (req/s)")
    parser.add_argument("--workload", default="code", choices=["conversation", "chat", "code"])
    parser.add_argument("--setups", nargs="+", default=["1:least_outstanding", "2:least_outstanding",
                                                         "2:round_robin"])
    args = parser.parse_args()
    settings = SEARCH.model_copy(update={"num_requests": args.requests})
    for setup in args.setups:
        replicas, router = setup.split(":")
        point = set_path(scenario(args.workload, int(replicas)), "cluster.global_scheduler", router)
        for rate in args.rates:
            started = time.process_time()
            probe = run_probe(point, rate * int(replicas), SLO, settings)
            m = probe.metrics
            print(f"{replicas} x {router:18s} {rate * int(replicas):5.2f} req/s: TTFT p90 {m.get('ttft_p90_s'):.3f} "
                  f"TBT p99 {m.get('tbt_p99_s'):.3f} p90 {m.get('tbt_p90_s'):.3f} served/offered "
                  f"{m.get('throughput_rps'):.3f}/{m.get('offered_rps'):.3f} growth {m.get('backlog_growth'):.3f} "
                  f"{'pass' if probe.passed else 'FAIL ' + ', '.join(probe.violated)} "
                  f"({time.process_time() - started:.1f} CPU-s)", flush=True)


if __name__ == "__main__":
    main()
