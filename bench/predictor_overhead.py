"""What pricing batches with the roofline (or learned) predictor costs in simulation time,
relative to the closed-form `linear` cost model.

    python bench/predictor_overhead.py [--requests 10000] [--repeats 5] [--profiles DIR]

Runs the sim_speed.py chat trace (Poisson 2 req/s, prompts 64..1536, outputs 16..768) with vllm
on one replica of Llama-2-7B on an 80 GB A100, once per predictor and repeat, interleaved, and
prints the median seconds and the ratio of medians to linear. The predictors give different
batch times, so the simulated systems differ too (roofline batches are slower, so more requests
are in flight and each formation handles more of them): the end-to-end ratio mixes that with the
cost of prediction. Two columns separate them: `predict %` is the time spent inside the
predictor's calls (stage_time, decode_run_times) as a percentage of the rest of the run, and the
`linear~roofline` row runs a linear model fitted (least squares) to the roofline's stage times
of this model and device, so it simulates nearly the same system at the linear model's cost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
from sim_speed import make_trace  # noqa: E402

import sim_core.engine.simulation as simulation  # noqa: E402
from sim_core import parse_config, run_simulation  # noqa: E402
from sim_core.predictor import BatchShape, build_predictor  # noqa: E402


def scenario(trace: Path, predictor: dict):
    return parse_config({"model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 4096,
                         "memory": {"planner": "vidur"}, "scheduler": {"type": "vllm"},
                         "predictor": predictor, "workload": {"trace_file": str(trace)}})


class TimedPredictor:
    """Forwards to a predictor and adds up the wall time of its calls."""

    def __init__(self, inner) -> None:
        self.inner, self.needs_context, self.seconds = inner, inner.needs_context, 0.0

    def __getattr__(self, name):  # everything else (e.g. what the result's accounting reads)
        return getattr(self.inner, name)

    def stage_time(self, shape, stage_id):
        start = time.perf_counter()
        value = self.inner.stage_time(shape, stage_id)
        self.seconds += time.perf_counter() - start
        return value

    def decode_run_times(self, num_requests, context, stage_id):
        start = time.perf_counter()
        value = self.inner.decode_run_times(num_requests, context, stage_id)
        self.seconds += time.perf_counter() - start
        return value


def matched_linear(config) -> dict:
    """A linear model fitted to the roofline's stage times on prefills of 64..1536 tokens and
    decode batches of 1..64 requests holding ~800 tokens each."""
    roofline = build_predictor(config)
    shapes = [BatchShape(1, p, ((p, 0),)) for p in range(64, 1537, 64)]
    shapes += [BatchShape(n, n, (), n, 800 * n) for n in range(1, 65)]
    tokens = np.array([shape.total_tokens for shape in shapes], dtype=np.float64)
    times = np.array([roofline.stage_time(shape, 0) for shape in shapes])
    per_token_s, base_s = np.polyfit(tokens, times, 1)
    return {"type": "linear", "base_s": max(float(base_s), 0.0), "per_token_s": float(per_token_s)}


def timed_run(config) -> tuple[float, float, int]:
    """(run seconds, seconds inside the predictor, batches)."""
    made = []

    def build(cfg):
        made.append(TimedPredictor(build_predictor(cfg)))
        return made[-1]

    simulation.build_predictor = build
    try:
        start = time.perf_counter()
        result = run_simulation(config)
        return time.perf_counter() - start, made[0].seconds, result.summary["num_batches"]
    finally:
        simulation.build_predictor = build_predictor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--qps", type=float, default=2.0)
    parser.add_argument("--profiles", help="also time the learned predictor on this Vidur-layout folder")
    args = parser.parse_args()
    trace = make_trace(args.requests, args.qps)
    predictors = {"linear": {"type": "linear"}, "roofline": {"type": "roofline"}}
    predictors["linear~roofline"] = matched_linear(scenario(trace, predictors["roofline"]))
    if args.profiles:
        predictors["learned"] = {"type": "learned", "profiles_dir": args.profiles,
                                 "cache_dir": str(ROOT / "bench" / "out")}
    configs = {name: scenario(trace, spec) for name, spec in predictors.items()}
    times = {name: [] for name in configs}
    shares, batches = {name: [] for name in configs}, {}
    for _ in range(args.repeats):
        for name, config in configs.items():
            seconds, predicting, batches[name] = timed_run(config)
            times[name].append(seconds)
            shares[name].append(100 * predicting / (seconds - predicting))
    base = statistics.median(times["linear"])
    print(f"trace {trace.relative_to(ROOT)}; median of {args.repeats}")
    print(f"{'predictor':16s} {'median s':>9s} {'batches':>8s} {'us/batch':>9s} {'ratio':>7s} {'predict %':>10s}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:16s} {median:9.2f} {batches[name]:8d} {median / batches[name] * 1e6:9.1f} {median / base:7.3f} "
              f"{statistics.median(shares[name]):10.1f}")


if __name__ == "__main__":
    main()
