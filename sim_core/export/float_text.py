"""Floats as Python writes them (`repr`, what json.dumps and pandas' CSV writer print), for a
whole column at once.

Arrow's float-to-string cast finds the same shortest round-trip digits as `repr` but lays them
out differently in three cases, each rewritten here without a Python loop over the values:

| value                                 | repr             | Arrow                 | done here                |
|---------------------------------------|------------------|-----------------------|--------------------------|
| integral, below 1e16                  | `100.0`, `-0.0`  | `100`, `-0`, `1e+15`  | integer text + `.0`      |
| 1e-4 <= abs < 1e16, not integral      | `12345678901.5`  | `1.23456789015e+10`   | a regex moves the point  |
| 0 < abs < 1e-4, abs >= 1e16, nan, inf | `1e-05`, `1e+16` | `0.00001`, ...        | `repr` per value (rare)  |

Arrow 26 writes an exponent from 1e10 on. Elsewhere it writes the same text as `repr`:
`tests/test_output_writers.py` compares the two on values of every magnitude.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

POSITIONAL = (1e-4, 1e16)          # repr writes abs(value) in [low, high) without an exponent
ARROW_SCIENTIFIC_FROM = 1e9        # Arrow 26 writes exponents from 1e10 on (a margin below; the tests check)
REPEATS_FROM = 1024                # longer columns whose values repeat are written once per run of equal values


def float_texts(values: np.ndarray, specials: dict[str, str | None] | None = None) -> pa.StringArray:
    """`repr(float(v))` of each value, as an Arrow string array.

    Args:
        values: float64 values (other float widths are converted to float64 first).
        specials: replacements of `repr`'s "nan", "inf" and "-inf" (None: a null), e.g. JSON's
            "NaN" and "Infinity".
    """
    values = np.ascontiguousarray(values, dtype=np.float64)
    fresh = np.ones(len(values), dtype=bool)       # a value other than the one before (bit for bit)
    bits = values.view(np.int64)
    fresh[1:] = bits[1:] != bits[:-1]
    if len(values) > REPEATS_FROM and fresh.mean() < 0.75:     # time series: each time twice or more
        return float_texts(values[fresh], specials).take(pa.array(np.cumsum(fresh) - 1))
    text = pc.cast(pa.array(values), pa.string())
    magnitude = np.abs(values)
    with np.errstate(invalid="ignore"):
        integral = (values == np.trunc(values)) & (magnitude < POSITIONAL[1])
        positional = (magnitude >= POSITIONAL[0]) & (magnitude < POSITIONAL[1])
        scientific = positional & ~integral & (magnitude >= ARROW_SCIENTIFIC_FROM)
    if integral.any():
        text = pc.replace_with_mask(text, pa.array(integral), _integral_texts(values[integral]))
    by_repr = ~(integral | positional)
    if scientific.any():
        fixed = _positional(text.filter(pa.array(scientific)), magnitude[scientific])
        text = pc.replace_with_mask(text, pa.array(scientific), fixed)
        unknown = np.zeros(len(values), dtype=bool)
        unknown[np.flatnonzero(scientific)] = pc.match_substring(fixed, "e").to_numpy(zero_copy_only=False)
        by_repr |= unknown                # a layout the rewrite does not know: repr writes it
    if by_repr.any():
        texts = [repr(value) for value in values[by_repr].tolist()]
        if specials:
            texts = [specials.get(value, value) for value in texts]  # type: ignore[misc]
        text = pc.replace_with_mask(text, pa.array(by_repr), pa.array(texts, pa.string()))
    return text


def _integral_texts(values: np.ndarray) -> pa.Array:
    """"100.0" for 100.0 (below 1e16, so exact as int64), "-0.0" for negative zero."""
    text = pc.binary_join_element_wise(pc.cast(pa.array(values.astype(np.int64)), pa.string()), ".0", "")
    negative_zero = np.signbit(values) & (values == 0)
    return pc.if_else(pa.array(negative_zero), "-0.0", text) if negative_zero.any() else text


def _positional(text: pa.Array, magnitude: np.ndarray) -> pa.Array:
    """Arrow's "d.ddde+K" as repr writes it, "dddd.dd" (the values are not integral, so more than
    K digits follow the point), one regex per exponent K; text of another layout is left as it is."""
    with np.errstate(divide="ignore"):
        exponents = np.floor(np.log10(magnitude)).astype(np.int64)   # may be one off next to a power of 10: no match
    for exponent in np.unique(exponents).tolist():
        group = pa.array(exponents == exponent)
        moved = pc.replace_substring_regex(text.filter(group), rf"^(-?\d)\.(\d{{{exponent}}})(\d+)e\+{exponent}$",
                                           r"\1\2.\3")
        text = pc.replace_with_mask(text, group, moved)
    return text
