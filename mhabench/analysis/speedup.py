"""Speedup over a baseline implementation, the one notion every view uses.

Within one case and one repeat, implementations are timed in interleaved rounds: sample i of every
implementation comes from round i, so both sides of a ratio saw the same machine state. An
implementation that spent its ``max_run_time_s`` first left the rounds early, so its samples are the
first rounds only, and two rows share exactly their first ``min(len)`` rounds (:func:`shared_rounds`).
The speedup of an implementation is therefore the median of its per-round ratios ``baseline[i] / impl[i]``
over the rounds both took part in, with a 95% bootstrap interval that resamples rounds
(:func:`mhabench.analysis.stats.paired_ratio`); a slow round slows both sides and cancels. Rows whose
samples are not aligned (an older run, a CSV-only run, fewer than ``MIN_PAIRED_ROUNDS`` shared rounds)
fall back to the ratio of medians with an unpaired bootstrap (:func:`mhabench.analysis.stats.ratio_of_medians`);
``speedup_method`` says which one a row got. Either interval is NaN below ``stats.MIN_INTERVAL_SAMPLES``.

The run summary, ``compare RUN``, the report, the plots and ``advise`` all read speedups from
:func:`speedup_rows` (:mod:`mhabench.analysis.spread` says how much they moved between repeats,
:mod:`mhabench.analysis.winners` reduces a run to one line per case).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from mhabench.analysis import stats
from mhabench.analysis.case_label import case_label
from mhabench.results.columns import (
    CASE_ID,
    IMPL,
    LATENCY_MS,
    PEAK_MEMORY_BYTES,
    REPEAT,
    ROUNDS_ID,
    SAMPLES_COLUMN,
    STATUS,
)
from mhabench.results.schema import RowStatus

DEFAULT_BASELINE = "naive"
MIN_PAIRED_ROUNDS = 3
"""Fewer shared rounds than this are too few to pair on: such rows use the ratio of medians (over every sample
of each side) instead. Their interval needs ``stats.MIN_INTERVAL_SAMPLES`` either way."""


class SpeedupMethod(str, enum.Enum):
    """How a speedup was estimated (``speedup_method``): paired per-round ratios, or the ratio of medians."""

    PAIRED = "paired"
    MEDIANS = "medians"

    __str__ = str.__str__


PAIRED, MEDIANS = SpeedupMethod


Row = Mapping[str, Any]
"""One result row: a record dict (fast over a large run) or a pandas Series."""


def raw_samples(row: Row | None) -> list[float]:
    """The raw latency samples the run stored for a row, [] where it stored none (a CSV-only run)."""
    times = row.get(SAMPLES_COLUMN) if row is not None else None
    return [float(t) for t in times] if isinstance(times, list | tuple | np.ndarray) and len(times) else []


def samples_of(row: Row | None) -> list[float]:
    """The raw latency samples of a row; a CSV-only run has just the median (one point, no CI)."""
    if row is None:
        return []
    if times := raw_samples(row):
        return times
    latency = row.get(LATENCY_MS)
    return [float(latency)] if latency is not None and math.isfinite(float(latency)) else []


def is_ok(row: Row) -> bool:
    return row.get(STATUS) == RowStatus.OK and bool(samples_of(row))


def shared_rounds(base_ms: list[float], impl_ms: list[float]) -> tuple[list[float], list[float]]:
    """The samples of the rounds both rows took part in: their first ``min(len)``.

    Sample i of a row is round i, and a row that left the rounds early never came back
    (:func:`mhabench.measure.rounds.run_rounds`), so the rounds two rows share are a common prefix.
    """
    shared = min(len(base_ms), len(impl_ms))
    return base_ms[:shared], impl_ms[:shared]


def speedup_estimate(
    base_ms: list[float], impl_ms: list[float], same_rounds: bool = True
) -> tuple[stats.RatioEstimate, str]:
    """Paired over the rounds both rows took part in when they were timed in the same rounds (same
    ``rounds_id``) and share at least ``MIN_PAIRED_ROUNDS``, else the ratio of medians; and which one it was."""
    base_shared, impl_shared = shared_rounds(base_ms, impl_ms)
    if same_rounds and len(base_shared) >= MIN_PAIRED_ROUNDS:
        return stats.paired_ratio(base_shared, impl_shared), PAIRED
    return stats.ratio_of_medians(base_ms, impl_ms), MEDIANS


def group_key(frame: pd.DataFrame) -> list[str]:
    """``case_id``, and ``repeat`` where the frame has it: each repeat of a case is its own set of rounds."""
    return [column for column in (CASE_ID, REPEAT) if column in frame.columns]


def speedup_rows(frame: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> pd.DataFrame:
    """``frame`` (without raw samples) plus ``case``, ``speedup`` and its CI, ``speedup_method``,
    ``memory_ratio`` and ``winner`` (per case and repeat).

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
    values = {position: _row_speedup(row, base) for position, row in group.items()}
    ok = [position for position, row in group.items() if is_ok(row)]
    winner = best({p: values[p]["speedup"] for p in ok}, {p: float(group[p][LATENCY_MS]) for p in ok})
    return {position: {**row_values, "winner": position == winner} for position, row_values in values.items()}


def _row_speedup(row: Row, base: Row | None) -> dict[str, Any]:
    ok = is_ok(row) and base is not None
    together = ok and rounds_of(row) is not None and rounds_of(row) == rounds_of(base)
    estimate, method = speedup_estimate(samples_of(base), samples_of(row), together) if ok else (None, "")
    return {
        "case": case_label(row),
        "speedup": estimate.ratio if estimate else math.nan,
        "speedup_ci_low": estimate.ci_low if estimate else math.nan,
        "speedup_ci_high": estimate.ci_high if estimate else math.nan,
        "speedup_method": method,
        "memory_ratio": ratio(row.get(PEAK_MEMORY_BYTES), base.get(PEAK_MEMORY_BYTES)) if ok else math.nan,
    }


def rounds_of(row: Row | None) -> str | None:
    """The id of the rounds the row's samples come from (None: timed alone, or a run older than the column)."""
    value = row.get(ROUNDS_ID) if row is not None else None
    return value if isinstance(value, str) and value else None


def best(speedup: Mapping[Any, float], latency_ms: Mapping[Any, float]) -> Any:
    """Key of the winner among ok rows: highest speedup when every one has a speedup (the paired
    estimate is the steadier one), else lowest median latency (no baseline to pair with); None if none."""
    if speedup and all(math.isfinite(value) for value in speedup.values()):
        return max(speedup, key=speedup.__getitem__)
    finite = {key: value for key, value in latency_ms.items() if math.isfinite(value)}
    return min(finite, key=finite.__getitem__) if finite else None


def ratio(numerator: Any, denominator: Any) -> float:
    """``numerator / denominator``, NaN where either is missing or the result is not finite."""
    try:
        value = float(numerator) / float(denominator)
    except (TypeError, ValueError, ZeroDivisionError):
        return math.nan
    return value if math.isfinite(value) else math.nan
