"""Lookup tables: predictions precomputed on a grid, read back by interpolation.

Inside the grid values are interpolated linearly; above its last point they scale in
proportion to the coordinate (operator times grow about linearly with tokens, batch and
context there); below its first point they stay at the first value.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _scaled(x: np.ndarray, axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x clipped into the axis, and the factor that extends the last value beyond it."""
    top = axis[-1]
    factor = np.where(x > top, x / top, 1.0)
    return np.clip(x, axis[0], top), factor


class Table1D:
    """y(x) from values on an increasing axis."""

    def __init__(self, axis: np.ndarray, values: np.ndarray) -> None:
        assert len(axis) == len(values) and len(axis) >= 1 and np.all(np.diff(axis) > 0)
        self.axis, self.values = np.asarray(axis, np.float64), np.asarray(values, np.float64)

    def __call__(self, x: ArrayLike) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        inside, factor = _scaled(x, self.axis)
        return np.interp(inside, self.axis, self.values) * factor


class Table2D:
    """z(x, y) from values on the grid axis_x x axis_y (bilinear inside)."""

    def __init__(self, axis_x: np.ndarray | list[float], axis_y: np.ndarray | list[float],
                 values: np.ndarray) -> None:
        values = np.asarray(values, np.float64)
        assert values.shape == (len(axis_x), len(axis_y))
        if len(axis_x) == 1:  # a single point: widen to a flat cell
            axis_x, values = [axis_x[0], axis_x[0] + 1], np.repeat(values, 2, axis=0)
        if len(axis_y) == 1:
            axis_y, values = [axis_y[0], axis_y[0] + 1], np.repeat(values, 2, axis=1)
        self.axis_x, self.axis_y = np.asarray(axis_x, np.float64), np.asarray(axis_y, np.float64)
        self.values = values

    def __call__(self, x: ArrayLike, y: ArrayLike) -> np.ndarray:
        x, fx = _scaled(np.asarray(x, dtype=np.float64), self.axis_x)
        y, fy = _scaled(np.asarray(y, dtype=np.float64), self.axis_y)
        i, wx = _cell(x, self.axis_x)
        j, wy = _cell(y, self.axis_y)
        v = self.values
        low = v[i, j] * (1 - wy) + v[i, j + 1] * wy
        high = v[i + 1, j] * (1 - wy) + v[i + 1, j + 1] * wy
        return (low * (1 - wx) + high * wx) * fx * fy


def _cell(x: np.ndarray, axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the grid cell holding each x (its left edge) and the weight of the right edge."""
    i = np.clip(np.searchsorted(axis, x, side="right") - 1, 0, len(axis) - 2)
    return i, (x - axis[i]) / (axis[i + 1] - axis[i])
