"""`python -m sim_core calibrate --measured DIR... --out FILE`: fit the device efficiencies and
the engine's host and API-server terms to measured runs of one GPU, print how well the fit does
on the runs it saw and on runs held out, and write the calibration file a scenario can name
(`predictor: {calibration: FILE}`)."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from sim_core.export.files import json_ready


def add_calibrate_command(commands: argparse._SubParsersAction) -> None:
    """Register `calibrate` on the CLI's subparsers."""
    sub = commands.add_parser("calibrate", help="fit efficiencies and engine overheads to measured runs")
    sub.add_argument("--measured", nargs="+", required=True, help="run folders or folders of runs (one GPU)")
    sub.add_argument("--out", required=True, help="calibration file to write (YAML)")
    sub.add_argument("--device", help="GPU (catalog id) of runs whose files name none")
    sub.add_argument("--predictor", default="roofline", help="predictor whose terms to fit (default: roofline)")
    sub.add_argument("--window", type=float, default=120.0,
                     help="seconds of each load stage replayed while fitting (default: 120)")
    sub.add_argument("--hold-out-every", type=int, default=4,
                     help="hold out every k-th run (by name) to check the fit; 0: fit on all")
    sub.add_argument("--json", action="store_true", help="print the calibration as one JSON object")
    sub.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    sub.set_defaults(handler=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    from sim_core.accuracy.calibrate import calibrate
    from sim_core.accuracy.layouts import ReadOptions, read_folder, unique_runs
    from sim_core.export.atomic import write_atomic

    options = ReadOptions(device=args.device)
    runs = unique_runs([run for folder in args.measured for run in read_folder(folder, options)])
    progress = None if args.json else (lambda line: print(line, file=sys.stderr, flush=True))
    result = calibrate(runs, args.predictor, args.window, args.hold_out_every, progress)
    document = result.document()
    write_atomic(args.out, "# written by `python -m sim_core calibrate`; name it in a scenario as\n"
                                f"# predictor: {{calibration: {args.out}}}\n" + yaml.safe_dump(json_ready(document),
                                                                                               sort_keys=False))
    if args.json:
        print(json.dumps(json_ready(document)))
        return 0
    print(f"fitted on {len(result.fit_runs)} runs of {result.engine} on {result.device} ({result.predictor}), "
          f"{result.evaluations} evaluations, loss {result.loss}")
    for name, value in result.values.items():
        print(f"  {name} = {value}")
    print("median absolute error, runs fitted: " + _errors(result.fit_errors))
    if result.held_out_runs:
        print(f"median absolute error, {len(result.held_out_runs)} runs held out ({', '.join(result.held_out_runs)}): "
              + _errors(result.held_out_errors))
    else:
        print("no run held out (fewer than 3 runs, or --hold-out-every 0): the fit is unchecked")
    for name, reason in result.left_out.items():
        print(f"left out {name}: {reason}")
    print(f"wrote {args.out}")
    return 0


def _errors(errors: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.1f}%" for name, value in errors.items()) or "none"
