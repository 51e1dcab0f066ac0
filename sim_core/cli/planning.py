"""`python -m sim_core compare A.yaml B.yaml ...` and `python -m sim_core sweep --spec FILE ...`."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sim_core.errors import ConfigError
from sim_core.export.text import one_line, shorten
from sim_core.sweep.local import MAX_WORKERS

if TYPE_CHECKING:
    import pandas as pd

    from sim_core.sweep.runner import SweepOutcome
    from sim_core.sweep.spec import SweepSpec

EXIT_USAGE, EXIT_INTERRUPTED = 2, 130


def add_planning_commands(commands: argparse._SubParsersAction) -> None:
    """Register `compare` and `sweep` on the CLI's subparsers."""
    compare = commands.add_parser("compare", help="run 2-6 scenarios on the same workload; print the differences")
    compare.add_argument("files", nargs="+", help="scenario files (YAML or JSON)")
    compare.add_argument("--own-workloads", action="store_true",
                         help="keep each file's workload (default: every scenario runs the first file's workload)")
    compare.add_argument("--json", action="store_true", help="print the table as JSON records")
    compare.set_defaults(handler=_compare)
    sweep = commands.add_parser("sweep", help="capacity search over a grid of scenarios (resumable)")
    sweep.add_argument("--spec", required=True, help="sweep spec (YAML): base, vary, slo, search, gpu_hour_usd")
    sweep.add_argument("--backend", choices=["local", "ray"], default="local",
                       help="local: process pool on this machine (default); ray: an existing Ray cluster")
    sweep.add_argument("--address", help="ray: the cluster's address (e.g. 127.0.0.1:6379)")
    sweep.add_argument("--out", required=True, help="folder for points.jsonl (the resume journal) and results.csv")
    sweep.add_argument("--workers", type=int, help="local: worker processes (default: every core)")
    sweep.add_argument("--limit", type=int, help="compute at most this many (>= 1) new points, then stop (resumable)")
    sweep.add_argument("--target-qps", type=float, help="also answer: the fewest GPUs that serve this rate (> 0 req/s)")
    sweep.set_defaults(handler=_sweep)
    for sub in (compare, sweep):
        sub.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)


def _compare(args: argparse.Namespace) -> int:
    from sim_core import load_config, parse_config, run_simulation
    from sim_core.results.compare import (
        comparison_table,
        describe_changes,
        format_comparison,
        same_workload,
    )

    if not 2 <= len(args.files) <= 6:
        raise ConfigError(f"compare: got {len(args.files)} scenario file(s); allowed 2 .. 6")
    scenarios = [load_config(name).model_dump(mode="json") for name in args.files]
    if not args.own_workloads:
        scenarios = same_workload(scenarios)
    names = _names(args.files)
    runs = {name: run_simulation(parse_config(s, source=f)) for name, s, f in zip(names, scenarios, args.files)}
    table = comparison_table(runs)
    if args.json:
        print(table.to_json(orient="records"))
        return 0
    for i, (name, scenario) in enumerate(zip(names, scenarios)):
        print(f"{name}: {describe_changes(scenarios[0], scenario) if i else 'the baseline'}")
    print("workload: " + ("each file its own" if args.own_workloads else "the first file's, for every scenario"))
    print(format_comparison(table))
    return 0


def _names(files: list[str]) -> list[str]:
    """File stems, prefixed with a letter when two stems are equal."""
    stems = [Path(f).stem for f in files]
    if len(set(stems)) == len(stems):
        return stems
    return [f"{chr(65 + i)}:{stem}" for i, stem in enumerate(stems)]


def _sweep(args: argparse.Namespace) -> int:
    from sim_core.sweep import (
        LocalBackend,
        RayBackend,
        load_sweep_spec,
        run_sweep,
        sweep_table,
    )

    _check_sweep_options(args)
    spec, base = load_sweep_spec(args.spec)
    backend = RayBackend(args.address or "") if args.backend == "ray" else LocalBackend(args.workers)
    bar = _ProgressBar()
    try:
        outcome = run_sweep(spec, base, backend, args.out, on_point=bar.update, limit=args.limit)
    except KeyboardInterrupt:
        bar.close()
        print(f"interrupted: finished points are kept in {Path(args.out) / 'points.jsonl'}; "
              "rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    bar.close()
    for note in outcome.notes:
        print(f"warning: {one_line(note)}", file=sys.stderr)
    _report(args, spec, outcome, sweep_table(spec, outcome.records))
    return _failures(outcome, list(spec.vary))


def _check_sweep_options(args: argparse.Namespace) -> None:
    """Refuse what the options of `sweep` cannot mean, before anything runs."""
    if args.workers is not None and not 1 <= args.workers <= MAX_WORKERS:
        raise ConfigError(f"--workers: got {args.workers}; allowed 1 .. {MAX_WORKERS}")
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit: got {args.limit}; allowed 1 .. any number (new points to compute; "
                          "leave it out for every point)")
    if args.target_qps is not None and not (math.isfinite(args.target_qps) and args.target_qps > 0):
        raise ConfigError(f"--target-qps: got {args.target_qps:g}; allowed a finite rate above 0 req/s")


def _failures(outcome: SweepOutcome, keys: list[str]) -> int:
    """0, or EXIT_USAGE with one line on stderr when points failed (they are rows with an error)."""
    failed = outcome.failed
    if not failed:
        return 0
    first = failed[0]
    label = ", ".join(f"{key.split('.')[-1]}={first['values'].get(key)}" for key in keys) or "base"
    print(one_line(f"error: {len(failed)} of {len(outcome.records)} point(s) failed (rows with an error in "
                   f"results.csv; a rerun tries them again); the first, {shorten(label, 100)}: {first['error']}"),
          file=sys.stderr)
    return EXIT_USAGE


def _report(args: argparse.Namespace, spec: SweepSpec, outcome: SweepOutcome, table: pd.DataFrame) -> None:
    from sim_core.sweep.pareto import best_per_objective, min_gpus_for

    grid, keys = outcome.grid, list(spec.vary)
    print(f"{len(outcome.records)} of {len(grid.points)} configuration(s) done: {outcome.num_resumed} from an "
          f"earlier run, {outcome.num_computed} computed now; {len(grid.skipped)} invalid combination(s) skipped")
    for _, reason in grid.skipped[:5]:
        print(f"  skipped {one_line(reason, 500)}")
    if not outcome.complete:
        print("stopped before the end (--limit): rerun the same command to finish")
    shown = [*keys, "max_qps", "uncertainty", "num_gpus", "cost_per_hour_usd", "usd_per_million_output_tokens",
             "binding_slo"]
    if len(table):
        print(table[shown].to_string(index=False, max_rows=20, float_format=lambda v: f"{v:.4g}"))
    best = best_per_objective(table, keys)
    for _, row in best.iterrows():
        print(f"best {row['objective']}: {row['configuration']} ({row['column']} = {row['value']:.4g})")
    if args.target_qps:
        fewest = min_gpus_for(table, args.target_qps).text(args.target_qps, keys)
        print(f"fewest GPUs for {args.target_qps:g} req/s: {fewest}")
    print(f"wrote {Path(args.out) / 'results.csv'}")


class _ProgressBar:
    """A one-line progress bar on stderr: points done, rate, time left."""

    def __init__(self) -> None:
        self.started, self.shown = time.perf_counter(), False
        self.first: int | None = None

    def update(self, done: int, total: int, record: dict) -> None:
        self.first = done - 1 if self.first is None else self.first
        elapsed = time.perf_counter() - self.started
        rate = (done - self.first) / elapsed * 60 if elapsed > 0 else 0.0
        left = (total - done) / rate if rate > 0 else 0.0
        filled = int(30 * done / max(total, 1))
        print(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} points, {rate:.1f}/min, "
              f"~{left:.1f} min left", end="", file=sys.stderr, flush=True)
        self.shown = True

    def close(self) -> None:
        if self.shown:
            print(file=sys.stderr)
        self.shown = False
