"""Reading a stored cell, whatever the file stored: the one place NaN, None, pd.NA and numpy scalars are cleaned.

A run read from Parquet, from a CSV, or written before a column existed gives NaN, None, ``pd.NA`` or numpy
scalars for the same fact. Every reader (the schema turning a record into a row, the analysis rules, the views,
the probe table) goes through these functions, so none has to know which file a value came from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd


def cell(value: Any) -> Any:
    """The value as plain Python: None for an empty cell (None, NaN, ``pd.NA``), numpy scalars as Python ones."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, np.generic):
        value = value.item()
        return None if isinstance(value, float) and math.isnan(value) else value
    return value


def field_of(value: Any, integer: bool = False) -> Any:
    """A stored cell as a :class:`mhabench.results.schema.ResultRow` field: :func:`cell`, with the raw samples (a
    Parquet array, a list) as a tuple of floats, and no samples as None (a row without them has no latency group).

    ``integer``: the field is a count, and a whole float is the int that was written (a column with empty cells
    reads back as floats: ``samples`` 4.0 is 4)."""
    kind = type(value)
    if kind is str or kind is bool or kind is int:  # most cells, already plain: the rest below
        return value
    if kind is float:
        return None if math.isnan(value) else int(value) if integer and value.is_integer() else value
    if isinstance(value, np.ndarray | list | tuple):
        return tuple(float(v) for v in value) or None
    return plain(value) if integer else cell(value)


def plain(value: Any) -> Any:
    """:func:`cell`, with a whole float as an int (8.0 read back from a CSV is the 8 that was written)."""
    value = cell(value)
    return int(value) if isinstance(value, float) and value.is_integer() else value


def number_of(value: Any) -> float | None:
    """A finite float, or None for text, a boolean, an empty cell, NaN or infinity."""
    if value is None or isinstance(value, bool | np.bool_):
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def whole_of(value: Any) -> int | None:
    """:func:`number_of` as an int (a count read back as 8.0 or "8")."""
    result = number_of(value)
    return None if result is None else int(result)


def text_of(value: Any) -> str:
    """A text cell, "" where it is empty."""
    value = cell(value)
    return "" if value is None else str(value)


def flag(value: Any) -> bool | None:
    """A boolean cell: True or False, None where it is empty (CSV "", pandas NaN).

    Why not ``bool(value)``: ``bool(nan)`` is True, so an undefined ``noisy`` would read as noisy."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    text = str(value).strip().lower()
    return True if text == "true" else False if text == "false" else None


def number(row: Mapping[str, Any], column: str) -> float | None:
    """The row's cell as a finite float, or None where there is none (a failed row, an older run, NaN)."""
    return number_of(row.get(column))


def text(row: Mapping[str, Any], column: str) -> str:
    """The row's text cell, "" where it is empty or missing."""
    return text_of(row.get(column))
