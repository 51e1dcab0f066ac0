"""How often the capacity search answers above a known capacity, with and without the reseed of
doubtful short failures (search versions 8-9).

The server is M/D/1-like: one request at a time (`batch_size_cap` 1), each a 90-token prefill
with one output token on a linear cost of 0.01 s + 0.001 s a token, so 0.1 s a request and a
capacity of exactly 10 req/s. Arrivals are Poisson, the SLO is loose (TTFT p90 <= 1e6 s), so only
the overload test can fail a probe: every answer above 10 req/s is a false pass. "reseed" is the
search as shipped; "off" disables the reseed (`search._doubtful` answers False), which is what
version 7 did.

    python bench/overload_false_pass.py --requests 400 --seeds 200 --confirm 4

prints, per mode, the mean answer, the shares of answers above 10 and 10.5 req/s, and the probes
simulated. See bench/README.md, "Search version 9".
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sim_core.sweep.search as search  # noqa: E402
from sim_core.config import parse_config  # noqa: E402
from sim_core.sweep import SearchSettings, capacity_search  # noqa: E402
from sim_core.sweep.spec import set_path  # noqa: E402

CAPACITY = 10.0   # req/s: 0.1 s a request, one at a time


def md1_scenario() -> dict:
    """The M/D/1-like scenario (capacity CAPACITY) as a plain dict."""
    return parse_config({
        "max_model_len": 1024,
        "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
        "scheduler": {"type": "vllm", "batch_size_cap": 1, "num_blocks": 64},
        "workload": {"prompt_tokens": {"distribution": "fixed", "value": 90},
                     "output_tokens": {"distribution": "fixed", "value": 1}},
    }).model_dump(mode="json")


def answers(base: dict, settings: SearchSettings, seeds: int, reseed: bool) -> tuple[list[float], int]:
    """The search's answers at seeds 1000.. and the probes it simulated in all."""
    shipped = search._doubtful
    if not reseed:
        search._doubtful = lambda probe, measure: False  # type: ignore[assignment]
    try:
        found, probes = [], 0
        for seed in range(seeds):
            capacity = capacity_search(set_path(base, "seed", 1000 + seed), {"ttft_p90_s": 1e6}, settings)
            found.append(capacity.max_qps)
            probes += len(capacity.probes)
        return found, probes
    finally:
        search._doubtful = shipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="requests per short probe")
    parser.add_argument("--seeds", type=int, default=200, help="searches per mode")
    parser.add_argument("--confirm", type=int, default=4, help="confirming probe length (0: none)")
    args = parser.parse_args()
    settings = SearchSettings(qps_min=0.25, qps_max=64, num_requests=args.requests, tolerance=0.05,
                              confirm_length=args.confirm, repeats=1)
    base = md1_scenario()
    for mode, reseed in (("reseed", True), ("off", False)):
        start = time.process_time()
        found, probes = answers(base, settings, args.seeds, reseed)
        above = sum(a > CAPACITY for a in found) / len(found)
        far = sum(a > 1.05 * CAPACITY for a in found) / len(found)
        print(f"{mode:6s} mean {sum(found) / len(found):.3f} req/s, above {CAPACITY:g}: {above:.1%}, "
              f"above {1.05 * CAPACITY:g}: {far:.1%}, probes {probes}, {time.process_time() - start:.1f} CPU-s")
    print(f"command: python bench/overload_false_pass.py --requests {args.requests} --seeds {args.seeds} "
          f"--confirm {args.confirm}")


if __name__ == "__main__":
    main()
