"""A table column as the text one cell of it is written as: in a CSV cell as pandas' `to_csv`
writes it, in JSON as `json.dumps` writes it. Whole columns at once (Arrow string arrays, null
where the cell is empty), so that writing a million rows never loops over them in Python.

| column            | CSV (pandas)                      | JSON (json.dumps)            |
|-------------------|-----------------------------------|------------------------------|
| int, uint         | `str`                             | `str`                        |
| float64           | `repr`; NaN empty; `inf`, `-inf`  | `repr`; `NaN`, `Infinity`    |
| bool              | `True`, `False`                   | `true`, `false`              |
| str, category, object | `str`, missing empty, quoted as Python's csv module quotes | `json.dumps` of each |

Other kinds (float32, dates, nullable integers, ...) are not handled here: `csv_text` returns
None and the caller writes that table with pandas.
"""

from __future__ import annotations

import csv
import io
import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from sim_core.export.float_text import float_texts

CSV_SPECIALS: dict[str, str | None] = {"nan": None}                 # inf and -inf as repr writes them
JSON_SPECIALS: dict[str, str | None] = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _quoting_characters() -> str:
    """The characters that make Python's csv module (what pandas writes through) quote a cell:
    the delimiter, the quote and, depending on the Python version, line-break characters."""
    def quoted(character: str) -> bool:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator=os.linesep, quoting=csv.QUOTE_MINIMAL).writerow([f"a{character}", "b"])
        return buffer.getvalue().startswith('"')
    return "".join(character for character in ',"\r\n' if quoted(character))


QUOTING = _quoting_characters()
_QUOTING_PATTERN = "[" + "".join("\\r" if c == "\r" else "\\n" if c == "\n" else c for c in QUOTING) + "]"


def csv_text(column: pd.Series | np.ndarray) -> pa.Array | None:
    """The column's CSV cells, unquoted (see `csv_quoted`): an int column as Arrow ints (the CSV
    writer prints them), every other kind as strings with nulls for empty cells; None for a kind
    this module does not write."""
    values = column.to_numpy() if isinstance(column, pd.Series) else column
    if isinstance(column, pd.Series) and not isinstance(column.dtype, np.dtype):
        return _strings(column) if _is_text(column) else None
    if values.dtype.kind in "iu":
        return pa.array(values)
    if values.dtype == np.float64:
        return float_texts(values, CSV_SPECIALS)
    if values.dtype.kind == "b":
        return pc.if_else(pa.array(values), "True", "False")
    if values.dtype.kind == "O":
        return _strings(pd.Series(values))
    return None


def csv_quoted(text: pa.Array) -> pa.Array | None:
    """`text` with the cells Python's csv module would quote in quotes (and their quotes doubled),
    or None when no cell needs it."""
    if not pa.types.is_string(text.type) and not pa.types.is_large_string(text.type):
        return None
    needs = pc.match_substring_regex(text, _QUOTING_PATTERN)
    if not pc.any(needs).as_py():
        return None
    quoted = pc.binary_join_element_wise('"', pc.replace_substring(text, '"', '""'), '"', "")
    return pc.if_else(needs, quoted, text)


def csv_header(names: list[str]) -> str:
    """The header line as pandas writes it (names quoted like cells), without the line end."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator=os.linesep, quoting=csv.QUOTE_MINIMAL).writerow([str(name) for name in names])
    return buffer.getvalue().removesuffix(os.linesep)


def json_text(column: pd.Series | np.ndarray) -> pa.Array:
    """Each value as `json.dumps` writes it (as `.tolist()` hands it over: numpy ints as int)."""
    values = column.to_numpy() if isinstance(column, pd.Series) else np.asarray(column)
    if values.dtype.kind in "iu":
        return pc.cast(pa.array(values), pa.string())
    if values.dtype.kind == "f":
        return float_texts(values, JSON_SPECIALS)
    if values.dtype.kind == "b":
        return pc.if_else(pa.array(values), "true", "false")
    codes, uniques = pd.factorize(pd.Series(values), use_na_sentinel=False)
    return pa.array([json.dumps(value) for value in np.asarray(uniques, dtype=object).tolist()],
                    pa.string()).take(pa.array(codes))


def _is_text(column: pd.Series) -> bool:
    return isinstance(column.dtype, (pd.CategoricalDtype, pd.StringDtype)) or column.dtype == object


def _strings(column: pd.Series) -> pa.Array:
    """`str` of each value, null where pandas writes an empty cell (None, NaN, NA)."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    texts = pa.array([str(value) for value in np.asarray(uniques, dtype=object).tolist()], pa.string())
    return texts.take(pa.array(codes, mask=codes < 0))
