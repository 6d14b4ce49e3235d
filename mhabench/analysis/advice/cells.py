"""Reading one cell of a result record, whatever the file stored.

A run read from Parquet, from a CSV, or written before a column existed gives NaN, None, numpy
scalars for the same fact; the rules read numbers and text only through these two functions (and
booleans through ``mhabench.results.columns.flag``), so none of them has to know which.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mhabench.results.columns import number as number  # the rules' one reader of numbers


def text(row: Mapping[str, Any], column: str) -> str:
    """A text cell, "" where it is empty or missing."""
    value = row.get(column)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)
