"""Measured kernel latencies on a grid, and how a point between (or beyond) grid points is priced.

A `LogGrid` holds one latency per point of a rectangular grid of positive coordinates (GEMM
m x n x k, attention batch x length, ...). A query is interpolated multilinearly in log space
(log latency against log of each coordinate), so halfway in log m between two grid points is
their geometric mean. Outside an axis's range:

    below the smallest value   flat: the smallest point's latency (a kernel never gets faster
                               than its launch-bound floor)
    above the largest value    the largest point's latency x (x / largest) ** power, power 1
                               by default (time linear in the count: work-bound kernels)

The shipped tables (`silicon_data/<device>.npz`, written by bench/derive_silicon.py) are loaded
here once per device and kept.
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from sim_core import portable_math as portable

DATA_DIR = Path(__file__).resolve().parent / "silicon_data"


def silicon_devices() -> list[str]:
    """Catalog device ids that have shipped measured tables."""
    return sorted(path.stem for path in DATA_DIR.glob("*.npz"))


def has_silicon_data(device_id: str) -> bool:
    """Whether the silicon predictor has measured tables for this catalog device id."""
    return device_id in silicon_devices()


class LogGrid:
    """Latencies (seconds) on a grid; interpolated in log space, floored below, scaled above."""

    def __init__(self, axes: list[np.ndarray], seconds: np.ndarray, powers: tuple[float, ...] | None = None) -> None:
        assert seconds.shape == tuple(len(a) for a in axes), "one latency per grid point"
        assert np.all(seconds > 0), "latencies must be positive (missing points are filled first)"
        self.axes = [np.asarray(a, dtype=np.float64) for a in axes]
        self.powers = powers or tuple(1.0 for _ in axes)
        self._log_axes = [portable.log(a) for a in self.axes]
        self._log_axes_list = [a.tolist() for a in self._log_axes]
        self._axes_list = [a.tolist() for a in self.axes]
        self.log_seconds = portable.log(np.asarray(seconds, dtype=np.float64))
        self._flat = self.log_seconds.ravel().tolist()
        self._seconds = np.asarray(seconds, dtype=np.float64).ravel().tolist()
        self._strides = [s // 8 for s in self.log_seconds.strides]

    def at(self, *coords: float) -> float:
        """Seconds at one point (pure Python: the hot loop's scalar path). On a grid point it is
        the stored latency itself."""
        if len(coords) == 2:
            return self._at_2d(coords[0], coords[1])
        return self._at_nd(coords)

    def _at_2d(self, first: float, second: float) -> float:
        """`_at_nd` of a point of a two-axis grid (attention: batch x length), its corners
        written out: the same float operations in the same order (its weights start at 1.0,
        and 1.0 x w and 0.0 + w are w)."""
        low0, frac0, scale0 = _locate(self._log_axes_list[0], self._axes_list[0], first, self.powers[0])
        low1, frac1, scale1 = _locate(self._log_axes_list[1], self._axes_list[1], second, self.powers[1])
        stride0, stride1, flat = self._strides[0], self._strides[1], self._flat
        multiplier = scale0 * scale1
        base = low0 * stride0 + low1 * stride1
        if frac0 == 0.0:
            if frac1 == 0.0:
                return self._seconds[base] * multiplier
            log_value = (1.0 - frac1) * flat[base] + frac1 * flat[base + stride1]
        elif frac1 == 0.0:
            log_value = (1.0 - frac0) * flat[base] + frac0 * flat[base + stride0]
        else:
            w0, w1 = 1.0 - frac0, 1.0 - frac1
            log_value = (w0 * w1 * flat[base] + w0 * frac1 * flat[base + stride1]
                         + frac0 * w1 * flat[base + stride0] + frac0 * frac1 * flat[base + stride0 + stride1])
        return math.exp(log_value) * multiplier

    def _at_nd(self, coords: tuple[float, ...]) -> float:
        """`at` over any number of axes."""
        indices, weights, multiplier = [0], [1.0], 1.0
        for axis, coord in enumerate(coords):
            low, frac, scale = _locate(self._log_axes_list[axis], self._axes_list[axis], coord, self.powers[axis])
            stride, multiplier = self._strides[axis], multiplier * scale
            if frac == 0.0:
                indices = [i + low * stride for i in indices]
            else:
                indices = [i + (low + step) * stride for i in indices for step in (0, 1)]
                weights = [w * f for w in weights for f in (1.0 - frac, frac)]
        if len(indices) == 1:
            return self._seconds[indices[0]] * multiplier
        log_value = 0.0
        for index, weight in zip(indices, weights):
            log_value += weight * self._flat[index]
        return math.exp(log_value) * multiplier

    def at_each(self, *coords: np.ndarray) -> np.ndarray:
        """`at` of each point of 1-d coordinate arrays, bit for bit (the same float operations
        in the same order: a corner `at` leaves out weighs 0 here and adds a zero; the logs and
        exps are `math`'s, once per point)."""
        count = len(coords[0])
        indices, weights, multiplier = [np.zeros(count, dtype=np.int64)], [np.ones(count)], np.ones(count)
        on_points = np.ones(count, dtype=bool)   # every axis on a grid point: `at` reads the seconds
        for axis, coord in enumerate(coords):
            low, frac, scale = _locate_each(self._log_axes[axis], self._axes_list[axis],
                                            np.asarray(coord, dtype=np.float64), self.powers[axis])
            stride, multiplier = self._strides[axis], multiplier * scale
            top = np.minimum(low + 1, len(self._axes_list[axis]) - 1)   # (weighs 0 where low is the last)
            indices = [i + step * stride for i in indices for step in (low, top)]
            weights = [w * f for w in weights for f in (1.0 - frac, frac)]
            on_points &= frac == 0.0
        flat = np.asarray(self._flat)
        log_value = np.zeros(count)
        for index, weight in zip(indices, weights):
            log_value = log_value + weight * flat[index]
        seconds = np.array([math.exp(v) for v in log_value.tolist()]) if count else np.zeros(0)
        if on_points.any():
            seconds = np.where(on_points, np.asarray(self._seconds)[indices[0]], seconds)
        return seconds * multiplier

    def grid(self, *coords: np.ndarray | float) -> np.ndarray:
        """Seconds at many points at once (arrays, or numbers that broadcast), as `at` prices each."""
        shape = np.broadcast(*coords).shape
        log_value = np.zeros(shape)
        multiplier = np.ones(shape)
        parts: list[tuple[np.ndarray, np.ndarray, int]] = []
        for axis, coord in enumerate(coords):
            low, frac, scale = _locate_many(self._log_axes[axis], np.broadcast_to(coord, shape).astype(np.float64),
                                            self.powers[axis], self.axes[axis])
            parts.append((low, frac, self._strides[axis]))
            multiplier = multiplier * scale
        flat = self.log_seconds.ravel()
        for corner in range(2 ** len(parts)):
            index = np.zeros(shape, dtype=np.int64)
            weight = np.ones(shape)
            for axis, (low, frac, stride) in enumerate(parts):
                upper = (corner >> axis) & 1
                top = np.minimum(low + upper, len(self.axes[axis]) - 1)
                index = index + top * stride
                weight = weight * (frac if upper else 1.0 - frac)
            log_value = log_value + weight * flat[index]
        return portable.exp(log_value) * multiplier


def _locate(logs: list[float], axis: list[float], coord: float, power: float) -> tuple[int, float, float]:
    """(lower index, fraction towards the next point in log space, multiplier beyond the range)."""
    last = len(logs) - 1
    if coord <= axis[0]:
        return 0, 0.0, 1.0
    if coord >= axis[last]:
        return last, 0.0, (coord / axis[last]) ** power
    x = math.log(coord)
    low = bisect.bisect_right(logs, x) - 1
    return low, (x - logs[low]) / (logs[low + 1] - logs[low]), 1.0


def _locate_each(logs: np.ndarray, axis: list[float], coords: np.ndarray,
                 power: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_locate` of each coordinate, bit for bit (its logs and powers by `math`, one a point)."""
    last = len(axis) - 1
    low = np.zeros(len(coords), dtype=np.int64)
    frac, scale = np.zeros(len(coords)), np.ones(len(coords))
    below = coords <= axis[0]
    above = ~below & (coords >= axis[last])
    if above.any():
        low[above] = last
        scale[above] = [(c / axis[last]) ** power for c in coords[above].tolist()]
    inside = ~(below | above)
    if inside.any():
        x = np.array([math.log(c) for c in coords[inside].tolist()])
        index = np.searchsorted(logs, x, side="right") - 1
        low[inside] = index
        frac[inside] = (x - logs[index]) / (logs[index + 1] - logs[index])
    return low, frac, scale


def _locate_many(logs: np.ndarray, coords: np.ndarray, power: float,
                 axis: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_locate over an array (same rule)."""
    last = len(logs) - 1
    clamped = np.clip(coords, axis[0], axis[last])
    x = portable.log(clamped)
    low = np.clip(np.searchsorted(logs, x, side="right") - 1, 0, max(last - 1, 0))
    if last == 0:
        frac = np.zeros_like(x)
    else:
        frac = np.clip((x - logs[low]) / (logs[low + 1] - logs[low]), 0.0, 1.0)
    scale = np.ones_like(coords)
    above = coords > axis[last]
    if above.any():
        scale[above] = portable.power(coords[above] / axis[last], power)
    return low, frac, scale


@dataclass(frozen=True)
class AttentionTable:
    """Attention latencies per (q heads, kv heads, head_dim) on one GPU, each a batch x length grid."""

    grids: dict[tuple[int, int, int], LogGrid]

    def kv_heads(self) -> list[int]:
        return sorted({kv for _, kv, _ in self.grids})

    def head_dims(self) -> list[int]:
        return sorted({hd for _, _, hd in self.grids})


@dataclass(frozen=True)
class DeviceTables:
    """Everything measured on one device (seconds per call of one layer's operator on one GPU)."""

    device: str
    meta: dict[str, object]
    gemm: dict[str, LogGrid]                     # dtype -> m x n x k
    context: AttentionTable                      # batch x isl (prompt tokens, nothing cached)
    generation: AttentionTable                   # batch x step (tokens already cached per request)
    allreduce: dict[int, LogGrid]                # TP -> bytes (vLLM custom all-reduce)
    nccl: dict[int, LogGrid]                     # TP -> bytes (NCCL all-reduce)
    moe: dict[tuple[int, ...], LogGrid]          # (hidden, inter, topk, experts, tp) -> tokens (bf16)
    # context and generation attention over an fp8 KV cache (empty where not measured)
    context_fp8: AttentionTable = field(default_factory=lambda: AttentionTable({}))
    generation_fp8: AttentionTable = field(default_factory=lambda: AttentionTable({}))

    def attention(self, kv_dtype: str) -> tuple[AttentionTable, AttentionTable] | None:
        """(context, generation) tables over a KV cache in `kv_dtype` (the bf16 ones for both
        16-bit formats); None where the device has no such measurements."""
        if kv_dtype in ("bf16", "fp16"):
            return self.context, self.generation
        if kv_dtype == "fp8" and self.context_fp8.grids and self.generation_fp8.grids:
            return self.context_fp8, self.generation_fp8
        return None


MS = 1e-3  # the tables store milliseconds


def tables_from_arrays(device: str, arrays: dict[str, np.ndarray]) -> DeviceTables:
    """DeviceTables from the arrays of a shipped file (names as bench/derive_silicon.py writes)."""
    meta = json.loads(str(arrays["meta"].reshape(-1)[0]))
    gemm = {key[len("gemm_"):-len("_ms")]: LogGrid(
        [arrays[key.replace("_ms", "_m")], arrays[key.replace("_ms", "_n")], arrays[key.replace("_ms", "_k")]],
        _seconds(arrays[key])) for key in arrays if key.startswith("gemm_") and key.endswith("_ms")}
    return DeviceTables(
        device, meta, gemm,
        _attention(arrays, "context", 2.0), _attention(arrays, "generation", 1.0),
        _by_tp(arrays, "allreduce"), _by_tp(arrays, "nccl"),
        {tuple(int(v) for v in shape): LogGrid([arrays["moe_tokens"]], _seconds(row))
         for shape, row in zip(arrays.get("moe_shapes", []), arrays.get("moe_ms", []))},
        _attention(arrays, "context_fp8", 2.0), _attention(arrays, "generation_fp8", 1.0))


def _seconds(milliseconds: np.ndarray) -> np.ndarray:
    return milliseconds.astype(np.float64) * MS


def _attention(arrays: dict[str, np.ndarray], name: str, length_power: float) -> AttentionTable:
    if f"{name}_ms" not in arrays:
        return AttentionTable({})
    axes = [arrays[f"{name}_batch"], arrays[f"{name}_length"]]
    return AttentionTable({(int(q), int(kv), int(hd)): LogGrid(axes, _seconds(grid), (1.0, length_power))
                           for (q, kv, hd), grid in zip(arrays[f"{name}_heads"], arrays[f"{name}_ms"])})


def _by_tp(arrays: dict[str, np.ndarray], name: str) -> dict[int, LogGrid]:
    if f"{name}_ms" not in arrays:
        return {}
    return {int(tp): LogGrid([arrays[f"{name}_bytes"]], _seconds(row))
            for tp, row in zip(arrays[f"{name}_tp"], arrays[f"{name}_ms"])}


@cache
def load_tables(device: str) -> DeviceTables:
    """The shipped tables of a catalog device id (read once). Raises FileNotFoundError without data."""
    with np.load(DATA_DIR / f"{device}.npz", allow_pickle=False) as data:
        return tables_from_arrays(device, {key: data[key] for key in data.files})
