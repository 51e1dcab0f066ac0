"""Sums of products that come out the same on every processor.

`np.dot` of two float vectors calls the BLAS library's dot kernel, which OpenBLAS picks by the
processor (its SkylakeX and Haswell kernels add the products in different orders), so its last
bits, and with them the bytes of the files a run writes, differ from one machine to the next.
`dot` multiplies element by element (each product correctly rounded, the same everywhere) and
adds the products with `math.fsum`, which rounds the exact sum once.
"""

from __future__ import annotations

import math

import numpy as np


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """The sum of a[i] * b[i], the products rounded as floats and their sum rounded once."""
    return math.fsum(np.multiply(a, b, dtype=np.float64).tolist())
