"""From AIConfigurator's measured kernel database (perf_db) to the silicon predictor's tables.

perf_db (ai-dynamo/aiconfigurator @095f58a, Apache-2.0) holds, per system and vLLM version,
latencies in ms of ONE call of one layer's operator on one GPU:

    gemm/vllm/<v>/gemm_perf.parquet                m, n, k, gemm_dtype
    attention/vllm/<v>/context_attention_perf      batch_size, isl, num_heads, num_key_value_heads,
                                                   head_dim, kv_cache_dtype (prefill, nothing cached)
    attention/vllm/<v>/generation_attention_perf   the same with step = tokens already cached
    moe/vllm/<v>/moe_perf.parquet                  num_tokens, hidden/inter size, topk, experts,
                                                   moe_tp_size, moe_ep_size, distribution
    comm/vllm/<v>/custom_allreduce_perf.parquet    message_size (elements), num_gpus
    comm/nccl/<v>/nccl_perf.parquet                NCCL collectives, message_size (elements)

What is kept, per device: one vLLM version (0.14.0 where measured, else the oldest: the
nearest to the 0.15 runs we compare with; NCCL 2.27.3, the version the systems name; the file
records which); GEMMs in bf16 on the measured m x n x k grid, and in fp8 (per-tensor W8A8) and
nvfp4 (W4A4, B200 only) from the newest version measured (its rows name vLLM's CUTLASS FP8 and
FlashInfer NVFP4 kernels, those vLLM 0.33 selects; the older versions' fp8 rows are no faster
than bf16 on large GEMMs, 1.0-1.1x, where the newest take 0.64-0.82x); context and generation attention with a bf16 KV
cache, and again with an fp8 one where measured, on batch x length grids per (q heads, kv heads,
head_dim); the vLLM custom all-reduce
(CUDA-graph variant) and NCCL all-reduce in half precision by bytes and TP; fused MoE in bf16
with the balanced token distribution (A100 has only power laws: power_law_1.01 there) and no
expert parallelism, by tokens per shape. Repeated measurements of a point keep their median;
a point slower than a larger measured one (more tokens, batch, length or bytes on every axis) is
capped at it (`monotone`: the database has a few 3-7x glitches).

The grids are rectangular; a point the database lacks (large batch x long sequences, the
k = n = 65536 GEMM corner) is filled from its measured neighbours: log-linear between the
nearest measured points on either side along some axis (as silicon_tables.LogGrid interpolates
between grid points) where there are such; else beyond the last measured point of an axis with
the log-log slope of its last two points (clamped to [0, the axis's power]: at most linear in a
count, quadratic in a prompt's length), flat below the first. `held_out_errors` measures this
rule on measured points it did not see.
Needs pandas and pyarrow (a development dependency).
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sim_core.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

SYSTEMS = {"a100_sxm": "a100-80gb", "h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "l40s": "l40s"}
PREFERRED_VERSION = {"vllm": "0.14.0", "nccl": "2.27.3"}   # else the oldest measured version
SOURCE = "ai-dynamo/aiconfigurator @095f58a (Apache-2.0), perf_db"
GEMM_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "fp4"}
NEWEST_GEMM_DTYPES = ("fp8", "nvfp4")   # read from the newest measured version (module docstring)
BYTES_PER_ELEMENT = 2   # the all-reduce rows are half precision; message_size counts elements
MOE_DISTRIBUTIONS = ("balanced", "power_law_1.01")
KV_DTYPES = {"bfloat16": "", "fp8": "_fp8"}   # perf_db kv_cache_dtype -> suffix of the attention tables
FAMILIES = ("gemm", "context_attention", "generation_attention", "context_attention_fp8",
            "generation_attention_fp8", "allreduce", "moe")


@dataclass(frozen=True)
class Measured:
    """A rectangular grid of latencies (ms), NaN where nothing was measured."""

    axes: tuple[np.ndarray, ...]
    values: np.ndarray
    powers: tuple[float, ...]     # exponent of the count beyond each axis's largest value
    order: tuple[int, ...]        # axes tried in turn when filling a missing point


# ---- reading ------------------------------------------------------------------------------------

def pick_version(folder: Path, filename: str, preferred: str) -> str | None:
    """The version folder under `folder` holding `filename`: `preferred` if present, else the
    oldest (`preferred` "newest": the newest)."""
    versions = sorted((p.name for p in folder.glob("*") if (p / filename).exists()), key=_version_key)
    if not versions:
        return None
    if preferred == "newest":
        return versions[-1]
    return preferred if preferred in versions else versions[0]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


def _read(perf_db: Path, system: str, family: str, runtime: str, filename: str,
          preferred: str | None = None) -> tuple[pd.DataFrame | None, str]:
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - pandas is a runtime dependency
        raise ConfigError(f"reading {perf_db} needs pandas") from exc
    folder = perf_db / system / family / runtime
    version = pick_version(folder, filename, preferred or PREFERRED_VERSION[runtime])
    if version is None:
        return None, ""
    path = folder / version / filename
    try:
        return pd.read_parquet(path), version
    except ImportError as exc:
        raise ConfigError(f"{path}: reading parquet needs pyarrow (pip install -r requirements-dev.txt)") from exc
    except Exception as exc:  # a corrupt or foreign file: name it
        raise ConfigError(f"{path}: not a readable parquet table ({exc})") from exc


def _grid(frame: pd.DataFrame, columns: list[str], axes: list[np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
    """(axes..., values): the median latency of each measured point on the axes' grid."""
    points = frame.groupby(columns)["latency"].median()
    axes = axes or [np.array(sorted(frame[c].unique()), dtype=np.int64) for c in columns]
    values = np.full(tuple(len(a) for a in axes), np.nan)
    where = tuple(np.searchsorted(a, points.index.get_level_values(i)) if len(columns) > 1
                  else np.searchsorted(a, points.index) for i, a in enumerate(axes))
    values[where] = points.to_numpy()
    return (*axes, monotone(values))


def monotone(values: np.ndarray) -> np.ndarray:
    """Each measured point capped by every measured point of at least its size on all axes: a
    kernel with more tokens, batch, length, heads' work or bytes is never faster, so a point
    above a larger one is a glitch of the measurement (some are 3-7x their neighbours). NaN
    (unmeasured) stays NaN."""
    out = values.copy()
    for _ in range(values.ndim):   # one pass per axis reaches every dominating point
        for axis in range(values.ndim):
            later_min = np.flip(np.fmin.accumulate(np.flip(out, axis), axis=axis), axis)
            out = np.where(np.isnan(out), np.nan, later_min)
    return out


def measured_tables(perf_db: Path, system: str) -> tuple[dict[str, dict[tuple[object, ...], Measured]], dict[str, str]]:
    """Every kept table of one system as measured grids, by family then key; and the versions."""
    out: dict[str, dict[tuple[object, ...], Measured]] = {family: {} for family in FAMILIES}
    versions: dict[str, str] = {}
    gemm, versions["gemm"] = _read(perf_db, system, "gemm", "vllm", "gemm_perf.parquet")
    newest, newest_version = _read(perf_db, system, "gemm", "vllm", "gemm_perf.parquet", "newest")
    for dtype, name in GEMM_DTYPES.items():
        frame = newest if dtype in NEWEST_GEMM_DTYPES else gemm
        rows = frame[frame["gemm_dtype"] == dtype] if frame is not None else []
        if len(rows):
            m, n, k, values = _grid(rows, ["m", "n", "k"])
            out["gemm"][(name,)] = Measured((m, n, k), values, (1.0, 1.0, 1.0), (0, 2, 1))
            if dtype in NEWEST_GEMM_DTYPES:
                versions[f"gemm_{name}"] = newest_version
    # fill order: a prefill grid's missing corner (many long prompts) scales with the batch; a
    # decode grid is linear in both and held-out points favour the length axis there
    for phase, length, power, order in (("context", "isl", 2.0, (0, 1)), ("generation", "step", 1.0, (1, 0))):
        frame, versions[f"{phase}_attention"] = _read(perf_db, system, "attention", "vllm",
                                                      f"{phase}_attention_perf.parquet")
        for kv_dtype, suffix in KV_DTYPES.items():
            if frame is not None and (frame["kv_cache_dtype"] == kv_dtype).any():
                out[f"{phase}_attention{suffix}"] = _attention(frame, length, power, order, kv_dtype)
                versions[f"{phase}_attention{suffix}"] = versions[f"{phase}_attention"]
    out["allreduce"], versions["allreduce"] = _comm(perf_db, system, "vllm", "custom_allreduce_perf.parquet")
    out["nccl"], versions["nccl"] = _comm(perf_db, system, "nccl", "nccl_perf.parquet")
    moe, versions["moe"] = _read(perf_db, system, "moe", "vllm", "moe_perf.parquet")
    if moe is not None:
        out["moe"] = _moe(moe)
        versions["moe_distribution"] = moe_distribution(moe)
    return out, versions


def _attention(frame: pd.DataFrame, length: str, power: float, order: tuple[int, ...],
               kv_dtype: str) -> dict[tuple[object, ...], Measured]:
    rows = frame[frame["kv_cache_dtype"] == kv_dtype]
    if "attn_dtype" in rows:
        rows = rows[rows["attn_dtype"] == "bfloat16"]
    if "window_size" in rows:   # sliding-window rows are another kernel configuration
        rows = rows[rows["window_size"].fillna(0) <= 0]
    axes = [np.array(sorted(rows[c].unique()), dtype=np.int64) for c in ("batch_size", length)]
    tables: dict[tuple[object, ...], Measured] = {}
    for key, group in rows.groupby(["num_heads", "num_key_value_heads", "head_dim"]):
        batch, lengths, values = _grid(group, ["batch_size", length], axes)
        tables[tuple(int(v) for v in key)] = Measured((batch, lengths), values, (1.0, power), order)
    return tables


def _comm(perf_db: Path, system: str, runtime: str, filename: str) -> tuple[dict[tuple[object, ...], Measured], str]:
    frame, version = _read(perf_db, system, "comm", runtime, filename)
    if frame is None:
        return {}, ""
    if "backend" in frame:
        frame = frame[frame["backend"] == "vllm_graph"]
    if "nccl_dtype" in frame:
        frame = frame[(frame["op_name"] == "all_reduce") & (frame["nccl_dtype"] == "half")]
    frame = frame.assign(bytes=frame["message_size"] * BYTES_PER_ELEMENT)
    axis = np.array(sorted(frame["bytes"].unique()), dtype=np.int64)
    return {(int(tp),): Measured((axis,), _grid(group, ["bytes"], [axis])[1], (1.0,), (0,))
            for tp, group in frame.groupby("num_gpus")}, version


def moe_distribution(frame: pd.DataFrame) -> str:
    """The token distribution kept: balanced, or the mildest power law where balanced is absent."""
    present = set(frame["distribution"])
    return next((d for d in MOE_DISTRIBUTIONS if d in present), MOE_DISTRIBUTIONS[0])


def _moe(frame: pd.DataFrame) -> dict[tuple[object, ...], Measured]:
    rows = frame[(frame["moe_dtype"] == "bfloat16") & (frame["distribution"] == moe_distribution(frame))
                 & (frame["moe_ep_size"] == 1)]
    axis = np.array(sorted(rows["num_tokens"].unique()), dtype=np.int64)
    shape = ["hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size"]
    return {tuple(int(v) for v in key): Measured((axis,), _grid(group, ["num_tokens"], [axis])[1], (1.0,), (0,))
            for key, group in rows.groupby(shape)}


# ---- filling --------------------------------------------------------------------------------------

def fill(table: Measured) -> np.ndarray:
    """The grid with every missing point priced from its measured neighbours (module docstring):
    first between measured neighbours along any axis, then beyond them, axes in `table.order`.

    Raises:
        ConfigError: a point has no measured neighbour along any axis (an empty table).
    """
    values = table.values.copy()
    while np.isnan(values).any():
        before = int(np.isnan(values).sum())
        for between_only in (True, False):
            for axis in table.order:
                logs = np.log(table.axes[axis].astype(np.float64))
                values = _fill_along(values, logs, axis, table.powers[axis], between_only)
            if between_only and int(np.isnan(values).sum()) < before:
                break   # interpolated something: look for more bracketed points before extrapolating
        if int(np.isnan(values).sum()) == before:
            raise ConfigError("silicon table: a grid has no measured point to fill from")
    return values


def _fill_along(values: np.ndarray, logs: np.ndarray, axis: int, power: float, between_only: bool) -> np.ndarray:
    """Fill the missing points of each line along `axis` that has a measured point: log-linear
    between neighbours; unless `between_only`, flat below the first and the last measured
    log-log slope (clamped to [0, power]) above the last."""
    moved = np.moveaxis(values, axis, -1).copy()
    lines = moved.reshape(-1, moved.shape[-1])
    for line in lines:
        known = ~np.isnan(line)
        if known.all() or not known.any():
            continue
        x, y = logs[known], np.log(line[known])
        missing = ~known
        if between_only:
            missing &= (logs > x[0]) & (logs < x[-1])
        guess = np.interp(logs[missing], x, y)          # between: log-linear; below: flat (left end)
        above = logs[missing] > x[-1]
        slope = power if len(x) < 2 else min(max((y[-1] - y[-2]) / (x[-1] - x[-2]), 0.0), power)
        guess[above] = y[-1] + slope * (logs[missing][above] - x[-1])   # beyond: the last slope
        line[missing] = np.exp(guess)
    return np.moveaxis(lines.reshape(moved.shape), -1, axis)


# ---- the shipped file -----------------------------------------------------------------------------

def derive_arrays(perf_db: Path, system: str) -> dict[str, np.ndarray]:
    """The arrays of `<device>.npz` for one perf_db system (names as silicon_tables reads them)."""
    tables, versions = measured_tables(perf_db, system)
    arrays: dict[str, np.ndarray] = {}
    for (dtype,), table in tables["gemm"].items():
        for name, axis in zip("mnk", table.axes):
            arrays[f"gemm_{dtype}_{name}"] = axis
        arrays[f"gemm_{dtype}_ms"] = fill(table).astype(np.float32)
    for phase in ("context", "generation"):
        for suffix in KV_DTYPES.values():
            stacked, name = tables[f"{phase}_attention{suffix}"], f"{phase}{suffix}"
            if not stacked:
                continue
            first = next(iter(stacked.values()))
            arrays[f"{name}_batch"], arrays[f"{name}_length"] = first.axes
            arrays[f"{name}_heads"] = np.array(list(stacked), dtype=np.int64)
            arrays[f"{name}_ms"] = np.stack([fill(t) for t in stacked.values()]).astype(np.float32)
    for family, prefix, axis_name in (("allreduce", "allreduce", "bytes"), ("nccl", "nccl", "bytes"),
                                      ("moe", "moe", "tokens")):
        rows = tables[family]
        if not rows:
            continue
        arrays[f"{prefix}_{'shapes' if family == 'moe' else 'tp'}"] = np.array(
            [list(k) for k in rows] if family == "moe" else [k[0] for k in rows], dtype=np.int64)
        arrays[f"{prefix}_{axis_name}"] = next(iter(rows.values())).axes[0]
        arrays[f"{prefix}_ms"] = np.stack([fill(t) for t in rows.values()]).astype(np.float32)
    meta = {"system": system, "device": SYSTEMS[system], "source": SOURCE, "versions": versions,
            "units": "ms per call of one layer's operator on one GPU; all-reduce axes in bytes"}
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    return arrays


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz numpy.load reads, byte-identical for equal arrays (fixed order and timestamps)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, member.getvalue(), compresslevel=9)
    path.write_bytes(buffer.getvalue())


# ---- held-out check ------------------------------------------------------------------------------

def held_out_errors(perf_db: Path, system: str, fraction: float = 0.2,
                    seed: int = 0) -> dict[str, tuple[float, float, int]]:
    """Per operator family: (median, p90) absolute % error and the count of `fraction` of the
    measured points (chosen with `seed`) priced by the fill rule from the others."""
    tables, _ = measured_tables(perf_db, system)
    rng = np.random.default_rng(seed)
    out = {}
    for family in FAMILIES:
        errors = [_held_out(table, fraction, rng) for table in tables[family].values()]
        flat = np.concatenate(errors) if errors else np.array([])
        if len(flat):
            out[family] = (float(np.median(flat)), float(np.percentile(flat, 90)), len(flat))
    return out


def _held_out(table: Measured, fraction: float, rng: np.random.Generator) -> np.ndarray:
    measured = np.flatnonzero(~np.isnan(table.values))
    chosen = rng.choice(measured, size=int(round(fraction * len(measured))), replace=False)
    if not len(chosen) or len(chosen) == len(measured):
        return np.array([])
    hidden = table.values.copy().ravel()
    hidden[chosen] = np.nan
    predicted = fill(replace(table, values=hidden.reshape(table.values.shape))).ravel()[chosen]
    truth = table.values.ravel()[chosen]
    return 100.0 * np.abs(predicted / truth - 1.0)
