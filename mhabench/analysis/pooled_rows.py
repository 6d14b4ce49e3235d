"""A replicated run's rows pooled: one row per case and implementation, read across its processes.

A run of ``replicates: N`` holds each (case, implementation) N times, once per process (replicate i as
``repeat`` i), and a table of every one of them says the same thing N times with N slightly different
numbers. The answer a reader wants is the one advise gives (:mod:`mhabench.analysis.advice.replicated`): read
across the processes. So the pooled row carries

- the **median latency across processes** (the median of the processes' medians) and the lowest and highest
  of them, the between-process range of the latency itself;
- the **speedup over the baseline across processes**: the geometric mean of each process's paired speedup,
  with the t interval over their logarithms (:func:`mhabench.analysis.estimate.across_processes`), which
  holds the within-process and the between-process spread together; and ``max / min − 1`` of those
  speedups (:func:`mhabench.analysis.estimate.between_process_range`);
- how many processes it ran ok in, of how many measured it;
- the largest peak memory and error of any process (the figure a user must budget for), and every other
  column from the process whose latency is the median one (the lower of the two middle ones for an even count).

Only ok rows are pooled; a (case, implementation) ok in no process keeps its first process's row (its status
and error).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mhabench.analysis.estimate import across_processes, between_process_range, is_ok
from mhabench.results.columns import CASE_ID, IMPL, LATENCY_MS, MAX_REL_ERR, PEAK_MEMORY_BYTES

PROCESSES_OK = "processes_ok"
"""Processes the (case, implementation) ran ok in."""
PROCESSES = "processes"
"""Processes that measured it (ok or not)."""
LATENCY_PROCESS_MIN_MS = "latency_process_min_ms"
LATENCY_PROCESS_MAX_MS = "latency_process_max_ms"
SPEEDUP_PROCESS_RANGE = "speedup_process_range"
"""``max / min − 1`` of the processes' speedups over the baseline: how far apart two processes put it."""
ACROSS_PROCESSES = "processes"
"""``speedup_method`` of a pooled row: the speedup was read across processes."""
LARGEST_OF = (PEAK_MEMORY_BYTES, MAX_REL_ERR)
"""Columns a pooled row takes the largest value of: what a user must budget for or tolerate in any process."""


def pooled_rows(speedups: pd.DataFrame) -> pd.DataFrame:
    """One row per (case, implementation) of :func:`speedup_rows`'s output for a replicated run, in first-seen
    order, with the columns above added."""
    if speedups.empty:
        return speedups
    # the frame turned into records once: one to_dict per group costs a column lookup per column per group
    records = speedups.to_dict("records")
    positions = speedups.groupby([CASE_ID, IMPL], sort=False, dropna=False).indices.values()
    return pd.DataFrame([_pooled_row([records[i] for i in group]) for group in sorted(positions, key=min)])


def middle_process(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The process a pooled row is shown from: of the ok rows with a latency, the one at the median latency (the
    lower middle of an even count), carrying the median of the processes' latencies; None where none ran ok.
    advise quotes this row for a replicated run, so its figures are the ones the pooled table shows."""
    ok = _ok(records)
    if not ok:
        return None
    by_latency = sorted(ok, key=lambda row: float(row[LATENCY_MS]))
    return {**by_latency[(len(by_latency) - 1) // 2], LATENCY_MS: float(np.median([row[LATENCY_MS] for row in ok]))}


def _ok(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [row for row in records if is_ok(row) and _finite(row.get(LATENCY_MS))]


def _pooled_row(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The pooled row of one (case, implementation)'s per-process rows."""
    shown, ok = middle_process(records), _ok(records)
    if shown is None:
        return {**records[0], PROCESSES_OK: 0, PROCESSES: len(records)}
    latencies = sorted(float(row[LATENCY_MS]) for row in ok)
    speedups = [float(row["speedup"]) for row in ok if _finite(row.get("speedup"))]
    estimate = across_processes(speedups)
    largest = {name: max((row[name] for row in ok if _finite(row.get(name))), default=math.nan) for name in LARGEST_OF}
    return {
        **shown,
        **largest,
        LATENCY_PROCESS_MIN_MS: latencies[0],
        LATENCY_PROCESS_MAX_MS: latencies[-1],
        "speedup": estimate.ratio,
        "speedup_ci_low": estimate.ci_low,
        "speedup_ci_high": estimate.ci_high,
        "speedup_method": ACROSS_PROCESSES if speedups else "",
        SPEEDUP_PROCESS_RANGE: between_process_range(speedups),
        PROCESSES_OK: len(ok),
        PROCESSES: len(records),
    }


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
