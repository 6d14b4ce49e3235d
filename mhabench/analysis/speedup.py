"""Speedup over a baseline implementation: every row's ratio to the baseline row of its case and repeat.

The ratio is :mod:`mhabench.analysis.estimate`'s (paired over the rounds both rows took part in, else the ratio of
medians); ``speedup_method`` says which one a row got. Which implementation a case picks is not read here: that is
the run's answer (:mod:`mhabench.analysis.answer`), and the views mark the pick from it.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from mhabench.analysis.case_label import case_label
from mhabench.analysis.estimate import Row, is_ok, row_ratio
from mhabench.results.columns import CASE_ID, IMPL, PEAK_MEMORY_BYTES, REPEAT, SAMPLES_COLUMN

DEFAULT_BASELINE = "naive"


def group_key(frame: pd.DataFrame) -> list[str]:
    """``case_id``, and ``repeat`` where the frame has it: each repeat of a case is its own set of rounds."""
    return [column for column in (CASE_ID, REPEAT) if column in frame.columns]


def speedup_rows(frame: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> pd.DataFrame:
    """``frame`` (without raw samples) plus ``case``, ``speedup`` and its CI, ``speedup_method`` and
    ``memory_ratio`` (per case and repeat).

    Works on plain records rather than ``iterrows``: pandas' per-row overhead, not the statistics,
    would otherwise dominate a large run's summary.
    """
    plain = frame.drop(columns=[SAMPLES_COLUMN], errors="ignore")
    if frame.empty:
        return plain
    records = frame.to_dict("records")
    values: dict[int, dict[str, Any]] = {}
    for positions in frame.groupby(group_key(frame), sort=False, dropna=False).indices.values():
        values.update(_case_speedups({int(p): records[p] for p in positions}, baseline))
    added = pd.DataFrame([values[position] for position in range(len(records))], index=frame.index)
    return pd.concat([plain, added], axis=1)


def _case_speedups(group: dict[int, Row], baseline: str) -> dict[int, dict[str, Any]]:
    """Speedups of one case and repeat, keyed like ``group`` (position in the frame)."""
    base = next((row for row in group.values() if row[IMPL] == baseline), None)
    base = base if base is not None and is_ok(base) else None
    return {position: _row_speedup(row, base) for position, row in group.items()}


def _row_speedup(row: Row, base: Row | None) -> dict[str, Any]:
    estimate = row_ratio(base, row) if is_ok(row) and base is not None else None
    return {
        "case": case_label(row),
        "speedup": estimate.ratio if estimate else math.nan,
        "speedup_ci_low": estimate.ci_low if estimate else math.nan,
        "speedup_ci_high": estimate.ci_high if estimate else math.nan,
        "speedup_method": str(estimate.method) if estimate else "",
        "memory_ratio": ratio(row.get(PEAK_MEMORY_BYTES), base.get(PEAK_MEMORY_BYTES)) if estimate else math.nan,
    }


def ratio(numerator: Any, denominator: Any) -> float:
    """``numerator / denominator``, NaN where either is missing or the result is not finite."""
    try:
        value = float(numerator) / float(denominator)
    except (TypeError, ValueError, ZeroDivisionError):
        return math.nan
    return value if math.isfinite(value) else math.nan
