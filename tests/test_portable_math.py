"""`portable_math.dot`: products rounded one by one, their sum rounded once, whatever the machine."""

from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sim_core.portable_math import dot

FINITE = st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False)


def test_a_small_term_between_two_that_cancel_survives():
    """1e16 + 1 rounds to 1e16 in a float, so adding left to right gives 0; the exact sum of
    the three products is 1."""
    assert dot(np.array([1e16, 1.0, -1e16]), np.ones(3)) == 1.0


def test_integer_counts_times_spans_as_the_kv_integral_uses_them():
    """Blocks in use 3, 5, 0 over spans 0.1, 0.2, 0.3 s: 0.30000000000000004 + 1.0 + 0.0, the
    products as floats round them, summed exactly and rounded once."""
    assert dot(np.array([3, 5, 0]), np.array([0.1, 0.2, 0.3])) == float(Fraction(3 * 0.1) + Fraction(5 * 0.2))


@given(st.lists(st.tuples(FINITE, FINITE), max_size=40))
def test_equals_the_exact_sum_of_the_rounded_products(pairs):
    a = np.array([x for x, _ in pairs], dtype=np.float64)
    b = np.array([y for _, y in pairs], dtype=np.float64)
    exact = sum((Fraction(float(x * y)) for x, y in zip(a.tolist(), b.tolist())), Fraction(0))
    assert dot(a, b) == float(exact)
