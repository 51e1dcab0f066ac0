"""Which reader a measured run needs, found from the names of its files; and reading a folder
from disk into the name -> bytes mapping the readers take (uploads give the same mapping)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from sim_core.accuracy.blis_table import ACTUALS, SPECS, is_blis_table, read_blis_table
from sim_core.accuracy.client_load import empty_workload
from sim_core.accuracy.inference_perf import is_inference_perf, read_inference_perf
from sim_core.accuracy.measured import MeasuredRun
from sim_core.accuracy.request_log import is_request_log, read_request_log
from sim_core.accuracy.server import device_of
from sim_core.accuracy.vllm_bench import is_vllm_bench, read_vllm_bench
from sim_core.errors import ConfigError

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_FILES = 2_000
READ_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl", ".csv")
SEARCH_DEPTH = 3   # a folder of runs may group them (e.g. <gpu>/<model>/<engine>/) this deep


@dataclass(frozen=True)
class ReadOptions:
    """What the user says about runs whose files do not: `device` overrides any GPU the files
    name; `fallback_device` (e.g. from the folders' names) is used when they name none; `seed`
    seeds the rebuilt client load."""

    device: str | None = None
    fallback_device: str | None = None
    seed: int = 42


Reader = Callable[[str, Mapping[str, bytes], ReadOptions], list[MeasuredRun]]


@dataclass(frozen=True)
class Layout:
    """One kind of measured run: how to recognise its files and how to read them."""

    name: str
    describe: str
    matches: Callable[[set[str]], bool]
    read: Reader


def _inference_perf(name: str, files: Mapping[str, bytes], options: ReadOptions) -> list[MeasuredRun]:
    return [read_inference_perf(name, files, options.device, options.seed, options.fallback_device)]


def _blis_table(name: str, files: Mapping[str, bytes], options: ReadOptions) -> list[MeasuredRun]:
    return read_blis_table(files, options.device, options.seed)


def _vllm_bench(name: str, files: Mapping[str, bytes], options: ReadOptions) -> list[MeasuredRun]:
    return [read_vllm_bench(name, files, options.device, options.seed, options.fallback_device)]


def _request_log(name: str, files: Mapping[str, bytes], options: ReadOptions) -> list[MeasuredRun]:
    return [read_request_log(name, files, options.device, options.seed, options.fallback_device)]


LAYOUTS: list[Layout] = [
    Layout("inference_perf", "an inference-perf run folder (profile.yaml, exp-config.yaml, results/)",
           is_inference_perf, _inference_perf),
    Layout("blis_table", f"BLIS validation tables ({SPECS} and {ACTUALS})", is_blis_table, _blis_table),
    Layout("request_log", "a per-request log (requests.jsonl and meta.json, LLMServingSim's layout)",
           is_request_log, _request_log),
    # last: it matches any single .json file, and the reader checks the fields
    Layout("vllm_bench", "one `vllm bench serve --save-result` JSON", is_vllm_bench, _vllm_bench),
]


def read_files(name: str, files: Mapping[str, bytes], options: ReadOptions = ReadOptions()) -> list[MeasuredRun]:
    """The runs in one set of files (relative name -> bytes), read by the first layout that
    recognises them.

    Raises:
        ConfigError: no layout recognises the files, or the one that does finds them malformed.
    """
    names = set(files)
    for layout in LAYOUTS:
        if layout.matches(names):
            return layout.read(name, files, options)
    known = "; ".join(layout.describe for layout in LAYOUTS)
    raise ConfigError(f"{name}: not a measured run this tool can read (expected {known})")


def read_folder(path: str | Path, options: ReadOptions = ReadOptions()) -> list[MeasuredRun]:
    """The runs in a folder on disk: the folder itself when it is one run, else every folder below
    it (up to SEARCH_DEPTH levels) that is one, sorted by path; a run is named by its path
    below the folder. A GPU named by the folder
    path (e.g. `runs_h100/`) is the fallback for runs whose files name none.

    Raises:
        ConfigError: nothing readable there (the message names the folder).
    """
    root = Path(path)
    if not root.exists():
        raise ConfigError(f"{root}: not found")
    if options.fallback_device is None and device_of(*root.resolve().parts):
        options = replace(options, fallback_device=device_of(*root.resolve().parts))
    if root.is_file():
        return read_files(root.stem, {root.name: _read(root)}, options)
    files = folder_files(root)
    if any(layout.matches(set(files)) for layout in LAYOUTS):
        return read_files(root.name, files, options)
    runs = [run for folder in _run_folders(root, SEARCH_DEPTH) for run in _read_or_refuse(root, folder, options)]
    if not runs:
        return read_files(root.name, files, options)   # raises, naming what was expected
    return runs


def _read_or_refuse(root: Path, folder: Path, options: ReadOptions) -> list[MeasuredRun]:
    """The runs of one folder of a collection; one that cannot be read is kept as an unsupported
    run carrying the reason, so the others still replay."""
    name = folder.relative_to(root).as_posix()
    if options.fallback_device is None:     # a collection of GPUs: each run folder's path may name its own
        options = replace(options, fallback_device=device_of(*folder.resolve().parts))
    try:
        return read_files(name, folder_files(folder), options)
    except ConfigError as exc:
        return [MeasuredRun(name, "unreadable", {}, empty_workload(name), (), 0.0, unsupported=str(exc))]


def _run_folders(root: Path, depth: int) -> list[Path]:
    """The folders below `root` (at most `depth` levels down, sorted) that hold one run; a run's
    own sub-folders are not searched."""
    found = []
    for child in sorted(p for p in root.iterdir() if p.is_dir()):
        if any(layout.matches(set(folder_files(child))) for layout in LAYOUTS):
            found.append(child)
        elif depth > 1:
            found.extend(_run_folders(child, depth - 1))
    return found


def unique_runs(runs: list[MeasuredRun]) -> list[MeasuredRun]:
    """The runs with each name once (the first read wins: a run folder given beside a table that
    also lists it keeps the folder's fuller figures)."""
    seen: dict[str, MeasuredRun] = {}
    for run in runs:
        seen.setdefault(run.name, run)
    return list(seen.values())


def folder_files(root: Path) -> dict[str, bytes]:
    """Relative name -> bytes of the readable files of a run folder (up to two levels deep, and
    the Hugging Face configs of `model_configs/<model>/config.json`)."""
    files: dict[str, bytes] = {}
    for path in sorted(root.glob("*")) + sorted(root.glob("*/*")) + sorted(root.glob("model_configs/*/config.json")):
        if path.is_file() and path.suffix in READ_SUFFIXES:
            if len(files) >= MAX_FILES:
                raise ConfigError(f"{root}: more than {MAX_FILES} files; point at one run or a folder of runs")
            files[path.relative_to(root).as_posix()] = _read(path)
    return files


def _read(path: Path) -> bytes:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB")
    return path.read_bytes()
