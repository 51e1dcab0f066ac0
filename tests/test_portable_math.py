"""`portable_math.dot`: products rounded one by one, their sum rounded once, whatever the machine."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim_core.portable_math import dot, exp, log, power, sin

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


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy warns of them as it always did
def test_values_math_refuses_get_numpy_s_answers():
    """log(0) is -inf, exp(1000) inf, (-8) ** 0.5 nan and 0 ** -1 inf, as numpy gives them;
    an inf - inf sum is nan."""
    assert log(np.array([0.0, 1.0])).tolist() == [-np.inf, 0.0]
    assert exp(np.array([1000.0, 0.0])).tolist() == [np.inf, 1.0]
    assert np.isnan(power(np.array([-8.0]), 0.5)[0])
    assert power(0.0, np.array([-1.0, 2.0])).tolist() == [np.inf, 0.0]
    assert np.isnan(dot(np.array([np.inf, -np.inf]), np.ones(2)))


def test_each_distinct_value_is_computed_once_and_placed_everywhere_it_occurs():
    """A grid repeats its coordinates: [4, 2, 4, 2] -> log 4, log 2, log 4, log 2, the same as
    the scalar path (math.log) gives; shapes and broadcasting are kept."""
    grid = np.array([[4.0, 2.0], [4.0, 2.0]])
    assert log(grid).tolist() == [[math.log(4.0), math.log(2.0)]] * 2
    assert power(np.array([2.0, 3.0]), np.array([[1.0], [2.0]])).tolist() == [[2.0, 3.0], [4.0, 9.0]]
    assert sin(0.0).shape == ()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # overflow to inf, as numpy warns of it
@given(st.lists(st.floats(1e-300, 1e300), min_size=1, max_size=30), st.floats(-3, 3))
def test_agree_with_the_scalar_path_bit_for_bit(values, exponent):
    array = np.array(values)
    assert log(array).tolist() == [math.log(v) for v in values]
    assert power(array, exponent).tolist() == [_scalar_pow(v, exponent) for v in values]


def _scalar_pow(base: float, exponent: float) -> float:
    try:
        return math.pow(base, exponent)
    except OverflowError:
        return math.inf
