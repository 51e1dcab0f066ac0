"""Command line: `python -m sim_core run|validate ...`.

Every user error ends the program with exit status 2 and one line on stderr naming the file,
row, column or field; nothing else prints a traceback unless --debug is given.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sim_core.errors import SimCoreError

if TYPE_CHECKING:
    from sim_core.engine.budget import Limits
from sim_core.cli.accuracy import add_accuracy_command
from sim_core.cli.calibrate import add_calibrate_command
from sim_core.cli.planning import add_planning_commands
from sim_core.cli.predictor import add_predictor_commands
from sim_core.export.run_files import TABLE_FORMATS, TRACE_FORMATS
from sim_core.export.text import one_line, shorten

EXIT_USAGE, EXIT_INTERNAL = 2, 70
FORMAT_CHOICES = ("auto", "canonical", "vidur", "vidur_lengths", "azure", "burstgpt", "mooncake")
SCENARIO_SUFFIXES = (".yaml", ".yml", ".json")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except SimCoreError as exc:
        _error_line(f"error: {exc}")
        return EXIT_USAGE
    except OSError as exc:
        where = f"{shorten(exc.filename)}: " if exc.filename else ""
        _error_line(f"error: {where}{exc.strerror or exc}")
        return EXIT_USAGE
    except Exception as exc:  # a bug in the core: say so in one line
        if args.debug:
            raise
        _error_line(f"internal error: {type(exc).__name__}: {shorten(exc)} (rerun with --debug for details)")
        return EXIT_INTERNAL


def _error_line(text: str) -> None:
    """Print one line on stderr, at most LINE_LIMIT characters, whatever the message holds."""
    print(one_line(text), file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sim_core", description=(
        "LLM-serving scheduling simulator: run a scenario, validate files, check cost models."))
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="simulate a scenario file (YAML or JSON)")
    run.add_argument("--config", required=True, help="scenario file")
    run.add_argument("--out", help="folder for requests.csv, batches.csv, summary.json, chrome_trace.json, ... "
                     "(listed in its manifest.json)")
    run.add_argument("--overwrite", action="store_true",
                     help="write into a non-empty --out that is not an earlier run's folder (same names replaced)")
    run.add_argument("--json", action="store_true", help="print the summary as JSON (NaN and infinity as null)")
    run.add_argument("--tables", default="csv", choices=TABLE_FORMATS,
                     help="write the tables as CSV (default) or Parquet (requests.parquet, ...; typed columns)")
    run.add_argument("--chrome-trace", default="json", choices=TRACE_FORMATS,
                     help="write the Chrome trace as chrome_trace.json (default) or gzip'd, chrome_trace.json.gz "
                          "(Perfetto opens it as it is)")
    run.set_defaults(handler=_run)
    generate = commands.add_parser("generate", help=(
        "write a scenario's workload (generated or transformed) as a trace CSV"))
    generate.add_argument("--config", required=True, help="scenario file whose workload section to use")
    generate.add_argument("--out", required=True, help="CSV to write (arrived_at,num_prefill_tokens,num_decode_tokens"
                          " and any optional columns: the canonical format)")
    generate.set_defaults(handler=_generate)
    validate = commands.add_parser("validate", help=(
        "check scenario files (.yaml/.yml/.json) or traces (any other file)"))
    validate.add_argument("files", nargs="+", help="files to check")
    validate.add_argument("--format", default="auto", choices=FORMAT_CHOICES, help="trace format (default: detect)")
    validate.add_argument("--skip-bad-rows", action="store_true", help="drop bad trace rows and count them")
    validate.set_defaults(handler=_validate)
    add_predictor_commands(commands)
    add_accuracy_command(commands)
    add_calibrate_command(commands)
    add_planning_commands(commands)
    for sub in (run, generate, validate):
        sub.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    for sub in (run, generate, validate):
        add_limits_flag(sub)
    return parser


def add_limits_flag(command: argparse.ArgumentParser) -> None:
    """`--no-limits`: lift the run budget (sim_core.engine.budget.Limits.cli) for a machine you know."""
    command.add_argument("--no-limits", action="store_true", help=(
        "run whatever the scenario costs (default: refuse a run estimated over ~16 GiB of memory, "
        "20M requests or 50M trace rows, before anything is built)"))


def limits_of(args: argparse.Namespace) -> Limits | None:
    """The budget a command runs under: the CLI's default, or none with --no-limits."""
    from sim_core.engine.budget import Limits

    return None if getattr(args, "no_limits", False) else Limits.cli()


def _run(args: argparse.Namespace) -> int:
    from sim_core import load_config, run_simulation
    from sim_core.export import OutputFormats, check_out_dir, write_outputs
    from sim_core.export.files import json_ready
    from sim_core.export.record_level import check_writable
    from sim_core.results.report import format_summary

    config = load_config(args.config)
    if args.out:   # before the run: a refusal must not cost its time
        check_writable(config.engine.record)
        check_out_dir(args.out, args.overwrite)
    started = time.perf_counter()
    result = run_simulation(config, limits=limits_of(args))
    elapsed = time.perf_counter() - started
    if args.out:
        write_outputs(result, args.out, overwrite=args.overwrite, formats=OutputFormats(args.tables, args.chrome_trace))
    if args.json:
        print(json.dumps(json_ready(result.summary), indent=2, allow_nan=False))
    else:
        print(format_summary(result))
        print(f"simulated {result.summary['num_requests']} requests and {result.summary['num_batches']} batches "
              f"in {elapsed:.2f} s")
        if args.out:
            print(f"wrote {Path(args.out) / f'requests.{args.tables}'} and the other outputs")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from sim_core import load_config
    from sim_core.engine.budget import check_budget
    from sim_core.workload import build_workload, write_trace

    config = load_config(args.config)
    limits = limits_of(args)
    if limits is not None:
        check_budget(config, limits)        # before the requests are generated or read
    workload = build_workload(config)
    write_trace(workload, args.out)
    print(f"wrote {len(workload)} requests to {args.out}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from sim_core.workload import ReadOptions, read_trace
    from sim_core.workload.report import describe

    for name in args.files:
        if Path(name).suffix.lower() in SCENARIO_SUFFIXES:
            notes = _validate_scenario(name, limits_of(args))
        else:
            read = read_trace(name, ReadOptions(format=args.format,
                                                on_bad_rows="skip" if args.skip_bad_rows else "error"))
            print(f"ok: {name}: {describe(read.workload, read.format, read.has_arrivals)}")
            notes = read.workload.notes
        for note in notes:
            print(f"  note: {note}")
    return 0


def _validate_scenario(name: str, limits: Limits | None) -> tuple[str, ...]:
    from sim_core import load_config
    from sim_core.engine.budget import check_budget
    from sim_core.memory import plan_memory
    from sim_core.workload import build_workload

    config = load_config(name)
    if limits is not None:
        check_budget(config, limits)        # before the requests are generated or read
    workload = build_workload(config)
    if config.disaggregation.enabled:
        from sim_core.cluster.pools import pool_views

        shape = " + ".join(f"{v.num_replicas} {v.name}" for v in pool_views(config))
        blocks: str | int = "/".join(str(v.config.scheduler.num_blocks or plan_memory(v.config).num_blocks)
                          for v in pool_views(config))
        print(f"ok: {name}: {config.scheduler.type} on {shape} x {config.model} ({config.device}), "
              f"{blocks} KV blocks per prefill/decode replica, {len(workload)} requests")
        return workload.notes
    blocks = config.scheduler.num_blocks or plan_memory(config).num_blocks
    print(f"ok: {name}: {config.scheduler.type} on {config.cluster.num_replicas} x {config.model} "
          f"({config.device}), {blocks} KV blocks per replica, {len(workload)} requests")
    return workload.notes
