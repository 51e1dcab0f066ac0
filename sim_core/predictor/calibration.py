"""Calibrate the roofline's efficiency factors on a (small) profile.

The GEMM rows of a profile (QKV, output, MLP up and down projections) pin down both factors:
small token counts are bound by memory (weights streamed once), large ones by compute. The
factors minimising the median absolute percentage error are found by a grid search
(0.05 .. 1.00 in steps of 0.01 for each), so five or ten rows across token counts suffice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim_core.catalog import DeviceSpec, ModelSpec
from sim_core.errors import ConfigError
from sim_core.predictor import operators as ops
from sim_core.predictor.accuracy import GEMMS
from sim_core.predictor.profile_dir import ProfileSet
from sim_core.predictor.roofline import GEMM_LAUNCH_S
from sim_core.predictor.training import clean

STEPS = np.round(np.arange(0.05, 1.0001, 0.01), 2)


@dataclass(frozen=True)
class Calibration:
    """Fitted factors and the median GEMM error (%) before and after."""

    compute_efficiency: float
    memory_efficiency: float
    num_rows: int
    median_error_before: float
    median_error_after: float


def gemm_rows(profiles: ProfileSet, model: ModelSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(FLOPs, bytes, measured seconds) of every cleaned GEMM row of the profile."""
    flops, nbytes, times = [], [], []
    for op in GEMMS:
        frame = profiles.operators.get(op)
        if frame is None:
            continue
        for tp in frame["tp"].unique():
            if model.num_q_heads % int(tp):
                continue
            rows, _ = clean(frame[frame["tp"] == tp], ("num_tokens",))
            cost = ops.layer_kernels(ops.LayerShape.of(model, int(tp)), rows["num_tokens"].to_numpy(np.float64))[op]
            flops.append(np.asarray(cost.flops, np.float64))
            nbytes.append(np.asarray(cost.bytes, np.float64))
            times.append(rows["time_s"].to_numpy())
    if not times:
        raise ConfigError(f"profile of {profiles.model} on {profiles.device}: no GEMM rows "
                          f"({', '.join(GEMMS)}) to calibrate on")
    return np.concatenate(flops), np.concatenate(nbytes), np.concatenate(times)


def _median_errors(compute: np.ndarray, memory: np.ndarray, times: np.ndarray, ec: float | np.ndarray,
                   em: float | np.ndarray) -> np.ndarray:
    predicted = np.sqrt((compute / ec) ** 2 + (memory / em) ** 2) + GEMM_LAUNCH_S
    return np.median(np.abs(predicted - times) / times, axis=-1) * 100


def calibrate(profiles: ProfileSet, model: ModelSpec, device: DeviceSpec) -> Calibration:
    """Efficiency factors of `device` that best fit the profile's GEMM rows."""
    flops, nbytes, times = gemm_rows(profiles, model)
    compute = flops / (device.bf16_tflops * 1e12)
    memory = nbytes / (device.memory_bandwidth_gbps * 1e9)
    errors = np.stack([_median_errors(compute, memory, times, ec, STEPS[:, None]) for ec in STEPS])
    i, j = np.unravel_index(np.argmin(errors), errors.shape)
    before = float(_median_errors(compute, memory, times, device.compute_efficiency, device.memory_efficiency))
    return Calibration(float(STEPS[i]), float(STEPS[j]), len(times), round(before, 2), round(float(errors[i, j]), 2))
