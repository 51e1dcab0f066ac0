"""Arithmetic whose last bits do not depend on the processor.

Two numpy paths depend on the machine. `np.dot` of two float vectors calls the BLAS library's
dot kernel, which OpenBLAS picks by the processor (its SkylakeX and Haswell kernels add the
products in different orders). `np.log`, `np.exp`, `np.power` and `np.sin` on float64 arrays run numpy's
own SIMD versions where the processor has AVX-512 and the C library's elsewhere, and the two
differ in the last bit now and then. Either way the bytes of the files a run writes would differ
from one machine to the next. The functions here avoid both: `dot` multiplies element by element
(each product correctly rounded, the same everywhere) and adds the products with `math.fsum`,
which rounds the exact sum once; the others call the C library (`math`) once per distinct value,
as the simulator's scalar paths do, so they agree with those bit for bit and are the same
wherever the C library is (glibc picks its own FMA variants, which serve every x86-64 server of
the last decade alike). Where `math` refuses a value (log of 0, an overflow, a negative base to a
fractional power) the result is numpy's (-inf, inf, nan), as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

ARITHMETIC_ERRORS = (ValueError, OverflowError, ZeroDivisionError)


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """The sum of a[i] * b[i], the products rounded as floats and their sum rounded once."""
    products = np.multiply(a, b, dtype=np.float64)
    try:
        return math.fsum(products.tolist())
    except ARITHMETIC_ERRORS:   # inf - inf, or an overflow: numpy's nan / inf
        return float(products.sum())


def log(values: np.ndarray | float) -> np.ndarray:
    """Natural logarithm of each value (math.log; 0 -> -inf, negative -> nan)."""
    return _each(math.log, np.log, values)


def exp(values: np.ndarray | float) -> np.ndarray:
    """e to each value (math.exp; overflow -> inf)."""
    return _each(math.exp, np.exp, values)


def sin(values: np.ndarray | float) -> np.ndarray:
    """Sine of each value in radians (math.sin)."""
    return _each(math.sin, np.sin, values)


def power(base: np.ndarray | float, exponent: np.ndarray | float) -> np.ndarray:
    """base ** exponent element by element, broadcast (math.pow)."""
    bases, exponents = np.asarray(base, dtype=np.float64), np.asarray(exponent, dtype=np.float64)
    if exponents.ndim == 0:
        e = float(exponents)
        return _each(lambda b: math.pow(b, e), lambda b: np.power(b, e), bases)
    if bases.ndim == 0:
        b = float(bases)
        return _each(lambda e: math.pow(b, e), lambda e: np.power(b, e), exponents)
    bases, exponents = np.broadcast_arrays(bases, exponents)
    pairs = zip(bases.ravel().tolist(), exponents.ravel().tolist())
    return np.array([_pow(b, e) for b, e in pairs], dtype=np.float64).reshape(bases.shape)


def _pow(b: float, e: float) -> float:
    try:
        return math.pow(b, e)
    except ARITHMETIC_ERRORS:
        return float(np.power(b, e))


def _each(function: Callable[[float], float], fallback: Callable[[float], object],
          values: np.ndarray | float) -> np.ndarray:
    """`function` of each value, computed once per distinct value (grids repeat theirs)."""
    array = np.asarray(values, dtype=np.float64)
    if array.size <= 1:
        return np.array(_map(function, fallback, array.ravel().tolist()), dtype=np.float64).reshape(array.shape)
    distinct, where = np.unique(array.ravel(), return_inverse=True)
    results = np.array(_map(function, fallback, distinct.tolist()), dtype=np.float64)
    return results[where].reshape(array.shape)


def _map(function: Callable[[float], float], fallback: Callable[[float], object], values: list[float]) -> list[float]:
    try:
        return [function(v) for v in values]
    except ARITHMETIC_ERRORS:   # rare: the value math refuses gets numpy's answer
        results = []
        for v in values:
            try:
                results.append(function(v))
            except ARITHMETIC_ERRORS:
                results.append(float(fallback(v)))   # type: ignore[arg-type]
        return results
