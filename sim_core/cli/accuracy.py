"""`python -m sim_core accuracy DIR...`: replay measured benchmark runs and print, per run and
load stage, the measured and simulated TTFT, E2E and time per output token with the error, and
the median absolute percentage error per figure over the runs."""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING, Any

from sim_core.accuracy.replay import measured_collapse
from sim_core.errors import ConfigError
from sim_core.export.files import json_ready

if TYPE_CHECKING:
    import pandas as pd

    from sim_core.accuracy.measured import MeasuredRun
    from sim_core.accuracy.replay import Replay


def add_accuracy_command(commands: argparse._SubParsersAction) -> None:
    """Register `accuracy` on the CLI's subparsers."""
    sub = commands.add_parser("accuracy", help="replay measured benchmark runs and compare the latencies")
    sub.add_argument("dirs", nargs="+", help="run folders, folders of runs, or result files")
    sub.add_argument("--device", help="GPU (catalog id) of runs whose files name none; overrides what they name")
    sub.add_argument("--predictor", help="predictor type to replay with (default: the scenario's)")
    sub.add_argument("--calibration", help="calibration file to replay with (see `calibrate`)")
    sub.add_argument("--seed", type=int, default=42, help="seed of the rebuilt client load")
    sub.add_argument("--stages", action="store_true", help="also print every load stage (default: whole runs)")
    sub.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    sub.set_defaults(handler=run_accuracy)


def run_accuracy(args: argparse.Namespace) -> int:
    from sim_core.accuracy.compare import comparison, median_errors
    from sim_core.accuracy.layouts import ReadOptions, read_folder, unique_runs
    from sim_core.accuracy.replay import replay

    runs: list[MeasuredRun] = []
    for folder in args.dirs:
        runs.extend(read_folder(folder, ReadOptions(device=args.device, seed=args.seed)))
    runs = unique_runs(runs)
    overrides = replay_overrides(args.predictor, args.calibration)
    replays, refused = [], {run.name: run.unsupported for run in runs if run.unsupported}
    for run in runs:
        if not run.unsupported:
            try:
                replays.append(replay(run, overrides))
            except ConfigError as exc:   # e.g. a predictor without data for this run's GPU
                refused[run.name] = str(exc)
    table = comparison(replays)
    fit = [r for r in replays if not r.run.saturated]
    medians = median_errors(table[table["run"].isin([r.run.name for r in fit])])
    if args.json:
        print(json.dumps(json_ready({"runs": [_run_record(r) for r in replays],
                                     "unsupported": refused,
                                     "median_abs_error_pct": medians, "rows": table.to_dict("records")})))
        return 0
    print(_text(replays, refused, table, medians, args.stages))
    return 0


def replay_overrides(predictor: str | None, calibration: str | None) -> dict[str, Any]:
    """Scenario sections to replace for the replay (the predictor's type, a calibration file)."""
    section: dict[str, Any] = {}
    if predictor:
        section["type"] = predictor
    if calibration:
        section["calibration"] = calibration
    return {"predictor": section} if section else {}


def _run_record(item: Replay) -> dict[str, Any]:
    return {"name": item.run.name, "layout": item.run.layout, "saturated": item.run.saturated,
            "measured_collapse": measured_collapse(item.run), "simulated_collapse": item.collapsed,
            "notes": list(item.run.notes)}


def _text(replays: list[Replay], refused: dict[str, str], table: pd.DataFrame, medians: dict[str, float],
          stages: bool) -> str:
    lines = []
    shown = table if stages else table[table["stage"] == "all"]
    for item in replays:
        flags = [f for f, on in (("measured saturated", item.run.saturated),
                                 ("measured backlog grows", not item.run.saturated and measured_collapse(item.run)),
                                 ("SIMULATED COLLAPSE", item.collapsed)) if on]
        scenario = item.run.scenario
        flagged = f"  ({'; '.join(flags)})" if flags else ""
        lines.append(f"{item.run.name}  [{scenario['model']} on {scenario['device']}, "
                     f"TP {scenario['cluster']['tensor_parallel_size']}]{flagged}")
        mine = shown[shown["run"] == item.run.name]
        for (stage, metric), rows in mine.groupby(["stage", "metric"], sort=False):
            cells = "  ".join(f"{row.stat} {_ms(row.measured_s)} -> {_ms(row.simulated_s)} ({row.error_pct:+.1f}%)"
                              for row in rows.itertuples())
            lines.append(f"  stage {stage:>3}  {metric:<4}  {cells}")
    for name, reason in refused.items():
        lines.append(f"{name}  not replayed: {reason}")
    lines.append("median absolute error over the unsaturated runs (whole-run figures): "
                 + ", ".join(f"{name} {value:.1f}%" for name, value in medians.items()))
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return "nan" if math.isnan(seconds) else f"{seconds * 1000:.1f}ms" if seconds < 10 else f"{seconds:.1f}s"
