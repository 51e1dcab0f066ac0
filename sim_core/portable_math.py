"""Arithmetic whose last bits are the same on every processor.

Two numpy paths depend on the machine. `np.dot` of two float vectors calls the BLAS library's
dot kernel, which OpenBLAS picks by the processor (its SkylakeX and Haswell kernels add the
products in different orders). `np.log`, `np.exp`, `np.power` and `np.sin` on float64 arrays run
numpy's own SIMD versions where the processor has AVX-512 and the C library's elsewhere, and the
two differ in the last bit now and then. Either way the bytes of the files a run writes would
differ from one machine to the next. The functions here avoid both: `dot` multiplies element by
element (each product correctly rounded, the same everywhere) and adds the products with
`math.fsum`, which rounds the exact sum once; the others call the C library (`math`) element by
element, as the simulator's scalar paths do. Use them wherever an array's values reach a result.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """The sum of a[i] * b[i], the products rounded as floats and their sum rounded once."""
    return math.fsum(np.multiply(a, b, dtype=np.float64).tolist())


def _each(function: Callable[[float], float], values: np.ndarray | float) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    return np.array([function(v) for v in array.ravel().tolist()], dtype=np.float64).reshape(array.shape)


def log(values: np.ndarray | float) -> np.ndarray:
    """Natural logarithm of each value (math.log)."""
    return _each(math.log, values)


def exp(values: np.ndarray | float) -> np.ndarray:
    """e to each value (math.exp)."""
    return _each(math.exp, values)


def sin(values: np.ndarray | float) -> np.ndarray:
    """Sine of each value in radians (math.sin)."""
    return _each(math.sin, values)


def power(base: np.ndarray | float, exponent: np.ndarray | float) -> np.ndarray:
    """base ** exponent element by element, broadcast (as Python's float power computes it)."""
    bases, exponents = np.broadcast_arrays(np.asarray(base, dtype=np.float64), np.asarray(exponent, dtype=np.float64))
    flat = [b ** e for b, e in zip(bases.ravel().tolist(), exponents.ravel().tolist())]
    return np.array(flat, dtype=np.float64).reshape(bases.shape)
