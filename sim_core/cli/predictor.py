"""`python -m sim_core predictor fit|report|compare|calibrate|silicon-report`: train and check cost
models against profiles in Vidur's layout (see sim_core/predictor/profile_dir.py), and the silicon
predictor's interpolation against held-out measured kernels."""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING

from sim_core.catalog import DEVICES, MODELS, DeviceSpec, ModelSpec
from sim_core.errors import ConfigError
from sim_core.export.files import json_ready

if TYPE_CHECKING:
    from sim_core.predictor.accuracy import OperatorAccuracy
    from sim_core.predictor.profile_dir import ProfileSet

DEFAULT_CACHE = ".sim_cache/predictor"


def add_predictor_commands(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the `predictor` command group on the CLI's subparsers."""
    group = commands.add_parser("predictor", help="train and check execution-time predictors on profiles")
    subs = group.add_subparsers(dest="predictor_command", required=True)
    specs = {
        "fit": ("train the learned predictor on every profile (and cache its grids)", _fit),
        "report": ("learned predictor: MAPE per operator on held-out rows", _report),
        "compare": ("roofline: median absolute percentage error per operator vs measured rows", _compare),
        "calibrate": ("fit the roofline's efficiency factors to a profile", _calibrate),
    }
    for name, (text, handler) in specs.items():
        sub = subs.add_parser(name, help=text)
        sub.add_argument("--profiles", required=True, help="folder in Vidur's layout (compute/, network/)")
        needs_pair = name in ("compare", "calibrate")
        sub.add_argument("--model", required=needs_pair, help="catalog model id (e.g. llama-2-7b)")
        sub.add_argument("--device", required=needs_pair, help="catalog device id (e.g. a100-80gb)")
        if name in ("fit", "report"):
            sub.add_argument("--estimator", default="random_forest", choices=["random_forest", "polynomial"])
        if name == "fit":
            sub.add_argument("--cache-dir", default=DEFAULT_CACHE, help="where the trained grids are stored")
        if name != "fit":
            sub.add_argument("--json", action="store_true", help="print one JSON object")
        sub.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
        sub.set_defaults(handler=handler)
    _add_silicon_report(subs)
    return group


def _add_silicon_report(subs: argparse._SubParsersAction) -> None:
    sub = subs.add_parser("silicon-report", help=(
        "silicon predictor: median and p90 absolute %% error of its interpolation on held-out measured kernels"))
    sub.add_argument("--perf-db", required=True, help="AIConfigurator's perf_db folder (<system>/gemm/...)")
    sub.add_argument("--device", help="one catalog device id (default: every device with data)")
    sub.add_argument("--fraction", type=float, default=0.2, help="share of the measured points held out")
    sub.add_argument("--seed", type=int, default=0, help="seed of the held-out choice")
    sub.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    sub.set_defaults(handler=_silicon_report)


def _silicon_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sim_core.predictor.silicon_derive import SYSTEMS, held_out_errors

    perf_db = Path(args.perf_db)
    systems = [s for s, d in SYSTEMS.items() if (perf_db / s).is_dir() and args.device in (None, d)]
    if not systems or not 0 < args.fraction < 1:
        raise ConfigError(f"--perf-db {perf_db}: no system folder for device {args.device or 'any'} "
                          f"(devices: {', '.join(SYSTEMS.values())}), or --fraction not in (0, 1)")
    report = {SYSTEMS[s]: held_out_errors(perf_db, s, args.fraction, args.seed) for s in systems}
    if args.json:
        print(json.dumps({device: {family: {"median_pct": m, "p90_pct": p, "points": n}
                                   for family, (m, p, n) in families.items()}
                          for device, families in report.items()}, allow_nan=False))
        return 0
    print(f"silicon interpolation on held-out points ({args.fraction:.0%}, seed {args.seed}): "
          f"absolute % error")
    print(f"{'device':10s} {'operator family':24s} {'points':>7s} {'median':>7s} {'p90':>7s}")
    for device, families in report.items():
        for family, (median, p90, count) in families.items():
            print(f"{device:10s} {family:24s} {count:7d} {median:7.1f} {p90:7.1f}")
    return 0


def _profile_sets(args: argparse.Namespace) -> list[ProfileSet]:
    from sim_core.predictor.profile_dir import find_compute_profiles, load_profile_set

    pairs = [(p.model, p.device) for p in find_compute_profiles(args.profiles)
             if (not args.model or p.model == args.model) and (not args.device or p.device == args.device)]
    if not pairs:
        raise ConfigError(f"{args.profiles}: no compute profile matches model={args.model} device={args.device}")
    return [load_profile_set(args.profiles, model, device) for model, device in dict.fromkeys(pairs)]


def _fit(args: argparse.Namespace) -> int:
    from sim_core.config.predictor import LearnedPredictorConfig
    from sim_core.predictor.learned_tables import cached_tables

    for profiles in _profile_sets(args):
        degrees = sorted({int(t) for f in profiles.operators.values() for t in f["tp"].unique()})
        for tp in degrees:
            started = time.perf_counter()
            tables = cached_tables(profiles, tp, args.estimator, args.cache_dir)
            print(f"{profiles.model} on {profiles.device}, TP={tp}: {len(tables.operators)} operators "
                  f"({', '.join(tables.operators)}) in {time.perf_counter() - started:.2f} s")
    LearnedPredictorConfig(profiles_dir=args.profiles, cache_dir=args.cache_dir)  # the options are valid
    print(f"cached under {args.cache_dir}; use predictor: {{type: learned, profiles_dir: {args.profiles}, "
          f"estimator: {args.estimator}, cache_dir: {args.cache_dir}}}")
    return _report(argparse.Namespace(**{**vars(args), "json": False}))


def _print_table(results: list[OperatorAccuracy], statistic: str, label: str) -> None:
    print(f"{'device':10s} {'model':14s} {'operator':26s} {'TP':>3s} {'rows':>6s} {'dropped':>8s} {label:>9s}")
    for r in results:
        value = r.mape if statistic == "mape" else r.median
        print(f"{r.device:10s} {r.model:14s} {r.operator:26s} {r.tp:3d} {r.num_rows:6d} {r.num_dropped:8d} "
              f"{value:9.2f}")


def _report(args: argparse.Namespace) -> int:
    from sim_core.predictor.accuracy import learned_accuracy

    results = [r for profiles in _profile_sets(args) for r in learned_accuracy(profiles, args.estimator)]
    return _print_results(results, "mape", "MAPE %", args.json,
                          f"per operator ({args.estimator}, held-out rows of all profiles and TP degrees), MAPE %:")


def _pair(args: argparse.Namespace) -> tuple[ProfileSet, ModelSpec, DeviceSpec]:
    from sim_core.predictor.profile_dir import load_profile_set

    if args.model not in MODELS or args.device not in DEVICES:
        raise ConfigError(f"--model/--device: unknown id ({args.model}, {args.device}); models: "
                          f"{', '.join(MODELS)}; devices: {', '.join(DEVICES)}")
    return load_profile_set(args.profiles, args.model, args.device), MODELS[args.model], DEVICES[args.device]


def _compare(args: argparse.Namespace) -> int:
    from sim_core.config.predictor import RooflinePredictorConfig
    from sim_core.predictor.accuracy import roofline_accuracy

    profiles, model, device = _pair(args)
    results = roofline_accuracy(profiles, model, device, RooflinePredictorConfig())
    return _print_results(results, "median", "median %", args.json, f"roofline vs measured, {args.model} on "
                          f"{args.device}, median absolute percentage error per operator:")


def _print_results(results: list[OperatorAccuracy], metric: str, header: str, as_json: bool, title: str) -> int:
    """The pooled figure per operator as one JSON object, or the full table then the pooled lines."""
    from sim_core.predictor.accuracy import pooled

    if as_json:
        print(json.dumps(json_ready(pooled(results, metric)), allow_nan=False))
        return 0
    _print_table(results, metric, header)
    print(f"\n{title}")
    for op, value in pooled(results, metric).items():
        print(f"  {op:26s} {value:6.2f}")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from sim_core.predictor.calibration import calibrate

    profiles, model, device = _pair(args)
    fit = calibrate(profiles, model, device)
    if args.json:
        print(json.dumps(json_ready(fit.__dict__), allow_nan=False))
        return 0
    print(f"{fit.num_rows} GEMM rows; median error {fit.median_error_before:.2f}% with the catalog's factors "
          f"({device.compute_efficiency}, {device.memory_efficiency}), {fit.median_error_after:.2f}% calibrated")
    print(f"predictor: {{type: roofline, compute_efficiency: {fit.compute_efficiency}, "
          f"memory_efficiency: {fit.memory_efficiency}}}")
    return 0
