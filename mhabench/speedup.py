"""Speedup over a baseline implementation, the one notion every view uses.

Per case, each implementation's speedup is ``median(baseline samples) / median(its samples)`` with a
95% bootstrap interval (:func:`mhabench.stats.ratio_of_medians`). The run summary, ``compare RUN``,
the report and the plots all read it from :func:`speedup_rows`; the baseline is one setting
(``--baseline``, default ``naive``).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from mhabench import stats
from mhabench.schema import SAMPLES_COLUMN
from mhabench.table import case_label

DEFAULT_BASELINE = "naive"


def samples_of(row: pd.Series | None) -> list[float]:
    """The raw latency samples of a row; a CSV-only run has just the median (one point, no CI)."""
    if row is None:
        return []
    times = row.get(SAMPLES_COLUMN)
    if isinstance(times, list | tuple) and len(times):
        return [float(t) for t in times]
    latency = row.get("latency_ms")
    return [float(latency)] if latency is not None and math.isfinite(float(latency)) else []


def is_ok(row: pd.Series) -> bool:
    return row.get("status") == "ok" and bool(samples_of(row))


def speedup_rows(frame: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> pd.DataFrame:
    """``frame`` (without raw samples) plus ``case``, ``speedup`` and its CI, ``memory_ratio``, ``winner``."""
    plain = frame.drop(columns=[SAMPLES_COLUMN], errors="ignore")
    if frame.empty:
        return plain
    parts = [
        pd.DataFrame(_case_speedups(group, baseline), index=group.index)
        for _, group in frame.groupby("case_id", sort=False)
    ]
    return pd.concat([plain, pd.concat(parts)], axis=1)


def _case_speedups(group: pd.DataFrame, baseline: str) -> list[dict[str, Any]]:
    base_rows = group[group["impl"] == baseline]
    base = base_rows.iloc[0] if len(base_rows) and is_ok(base_rows.iloc[0]) else None
    ok_latency = {r["impl"]: float(r["latency_ms"]) for _, r in group.iterrows() if is_ok(r)}
    winner = min(ok_latency, key=ok_latency.__getitem__) if ok_latency else None
    rows = []
    for _, row in group.iterrows():
        ok = is_ok(row)
        estimate = stats.ratio_of_medians(samples_of(base), samples_of(row)) if ok and base is not None else None
        base_memory = base.get("peak_memory_bytes") if base is not None else None
        rows.append(
            {
                "case": case_label(row),
                "speedup": estimate.ratio if estimate else math.nan,
                "speedup_ci_low": estimate.ci_low if estimate else math.nan,
                "speedup_ci_high": estimate.ci_high if estimate else math.nan,
                "memory_ratio": ratio(row.get("peak_memory_bytes"), base_memory) if ok else math.nan,
                "winner": row["impl"] == winner,
            }
        )
    return rows


def ratio(numerator: Any, denominator: Any) -> float:
    """``numerator / denominator``, NaN where either is missing or the result is not finite."""
    try:
        value = float(numerator) / float(denominator)
    except (TypeError, ValueError, ZeroDivisionError):
        return math.nan
    return value if math.isfinite(value) else math.nan
