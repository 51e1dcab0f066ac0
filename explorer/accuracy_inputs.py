"""The Accuracy page's inputs: uploaded files turned into the name -> bytes mapping the measured-run
readers take (`sim_core.accuracy.layouts.read_files`), and the replay of what they hold under the
server's budget.

Browsers upload files without their folders, so each uploaded file is known by its base name
and the names an inference-perf run keeps under `results/` are put back there. A zip of a run
folder is read in memory (never extracted): at most MAX_FILES entries of readable suffixes, each
at most MAX_FILE_BYTES once inflated, MAX_TOTAL_BYTES in all; the folder the whole zip sits in
(`run1/profile.yaml`) is taken off the names, and a zip of a folder of runs gives one run per
sub-folder. Names only ever key the mapping: nothing is opened by a name from the input.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Sequence
from pathlib import PurePosixPath

from explorer.server import run_slots, settings
from sim_core.accuracy.layouts import LAYOUTS, MAX_FILE_BYTES, MAX_FILES, READ_SUFFIXES, ReadOptions, read_files
from sim_core.accuracy.measured import MeasuredRun
from sim_core.accuracy.replay import Replay, replay, scenario_config
from sim_core.engine.budget import check_budget
from sim_core.errors import ConfigError

MAX_TOTAL_BYTES = 256 * 1024**2
MAX_RUNS = 8                 # runs replayed for one press of Replay
SLOT_WAIT_S = 30.0
RESULTS_FILE = re.compile(r"(summary|stage_\d+)_lifecycle_metrics\.json$")   # inference-perf's results/


def run_files(uploads: Sequence[tuple[str, bytes]]) -> tuple[str, dict[str, bytes]]:
    """(run name, relative name -> bytes) of the uploaded files: one zip of a run folder, or the
    run's files themselves.

    Raises:
        ConfigError: nothing uploaded, a zip among other files, two files of one name, or a
            limit passed (the message names the file).
    """
    if not uploads:
        raise ConfigError("no files uploaded")
    zips = [name for name, _ in uploads if name.lower().endswith(".zip")]
    if zips:
        if len(uploads) > 1:
            raise ConfigError(f"{zips[0]}: upload one zip of a run folder on its own, or the run's files without a zip")
        name, data = uploads[0]
        return PurePosixPath(name).stem, zip_files(name, data)
    if len(uploads) > MAX_FILES:
        raise ConfigError(f"{len(uploads):,} files uploaded, over the limit of {MAX_FILES:,}")
    files: dict[str, bytes] = {}
    for name, data in uploads:
        base = PurePosixPath(name.replace("\\", "/")).name
        key = f"results/{base}" if RESULTS_FILE.fullmatch(base) else base
        if key in files:
            raise ConfigError(f"{base}: uploaded twice; upload one run at a time")
        files[key] = _checked(base, len(data), data)
    _check_total(files)
    single = len(files) == 1
    return (PurePosixPath(next(iter(files))).stem if single else "uploaded run"), files


def zip_files(name: str, data: bytes) -> dict[str, bytes]:
    """The readable files in a zip (relative name -> bytes), read in memory within the limits,
    with the one folder that holds them all taken off their names.

    Raises:
        ConfigError: not a zip, or a limit passed (the message names the zip and the entry).
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise ConfigError(f"{name}: not a zip file ({exc})") from None
    entries = [info for info in archive.infolist()
               if not info.is_dir() and PurePosixPath(info.filename).suffix.lower() in READ_SUFFIXES
               and not PurePosixPath(info.filename).name.startswith(".")]
    if len(entries) > MAX_FILES:
        raise ConfigError(f"{name}: {len(entries):,} files, over the limit of {MAX_FILES:,}")
    files: dict[str, bytes] = {}
    total = 0
    for info in entries:
        _checked(f"{name}: {info.filename}", info.file_size, b"")     # the declared size, before inflating
        try:
            with archive.open(info) as entry:
                content = entry.read(MAX_FILE_BYTES + 1)                # a lying header cannot inflate past this
        except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError) as exc:
            raise ConfigError(f"{name}: {info.filename}: cannot be read ({exc})") from None
        _checked(f"{name}: {info.filename}", len(content), content)
        total += len(content)
        if total > MAX_TOTAL_BYTES:
            raise ConfigError(f"{name}: more than {MAX_TOTAL_BYTES // 2**20} MiB once inflated")
        files[_relative(info.filename)] = content
    return _without_common_folder(files)


def replay_uploaded(name: str, files: dict[str, bytes], device: str | None, override: bool) -> list[Replay]:
    """Read the run(s) in `files` and replay each, after checking its cost against the server's
    limits, in one of the server's run slots. `device`: the GPU for runs whose files name none
    (with `override`, for every run).

    Raises:
        SimCoreError: unreadable files, a run over the budget, or the server busy.
    """
    options = ReadOptions(device=device if override else None, fallback_device=device)
    runs = read_runs(name, files, options)
    if len(runs) > MAX_RUNS:
        raise ConfigError(f"{name}: {len(runs)} runs; upload at most {MAX_RUNS} at a time")
    limits = settings().limits
    for run in runs:
        check_budget(scenario_config(run), limits, run.workload)     # every run, before any is simulated
    slots = run_slots()
    if not slots.acquire(timeout=SLOT_WAIT_S):
        raise ConfigError("the server is running as many simulations as it allows; press Replay again in a moment")
    try:
        return [replay(run, limits=limits) for run in runs]
    finally:
        slots.release()


def read_runs(name: str, files: dict[str, bytes], options: ReadOptions) -> list[MeasuredRun]:
    """The runs in `files`: the files themselves when they are one run, else each top folder that
    is one (a zip of a folder of runs), sorted by name; as `layouts.read_folder` reads a disk.

    Raises:
        ConfigError: nothing readable (the message names what was expected).
    """
    if any(layout.matches(set(files)) for layout in LAYOUTS):
        return read_files(name, files, options)
    folders: dict[str, dict[str, bytes]] = {}
    for key, data in files.items():
        if "/" in key:
            head, rest = key.split("/", 1)
            folders.setdefault(head, {})[rest] = data
    runs = []
    for folder in sorted(folders):
        if any(layout.matches(set(folders[folder])) for layout in LAYOUTS):
            runs.extend(read_files(folder, folders[folder], options))
    return runs or read_files(name, files, options)     # raises, naming what was expected


def app_message(message: str) -> str:
    """A reader's message as the page says it: the CLI's `--device` is the page's GPU box."""
    return message.replace("(--device)", "(pick it in the GPU box)").replace("--device", "the GPU box")


def _checked(where: str, size: int, data: bytes) -> bytes:
    if size > MAX_FILE_BYTES:
        raise ConfigError(f"{where}: larger than {MAX_FILE_BYTES // 2**20} MiB")
    return data


def _check_total(files: dict[str, bytes]) -> None:
    if sum(len(data) for data in files.values()) > MAX_TOTAL_BYTES:
        raise ConfigError(f"the uploaded files hold more than {MAX_TOTAL_BYTES // 2**20} MiB")


def _relative(name: str) -> str:
    """A zip entry's name as a clean relative name (no leading `/`, no `.` or `..` parts)."""
    parts = [part for part in name.replace("\\", "/").split("/") if part not in ("", ".", "..")]
    return "/".join(parts)


def _without_common_folder(files: dict[str, bytes]) -> dict[str, bytes]:
    """Names with the leading folder every entry shares removed (a zip of `run1/`), repeatedly."""
    while files and all("/" in name for name in files):
        heads = {name.split("/", 1)[0] for name in files}
        if len(heads) != 1:
            break
        files = {name.split("/", 1)[1]: data for name, data in files.items()}
    return files
