"""Run-to-run spread: does a speedup reproduce across runs of one config, or across ``--repeat`` passes?

``mhabench spread RUN [RUN ...]`` answers the question a reader of any benchmark asks first. Several
runs (e.g. three back-to-back ``make run``s, each a fresh process) are read as the repeats of one
run — run *i* becomes repeat *i* — and :func:`spread_of` gives, per (case,
implementation), each run's speedup over the baseline and their spread ``(max − min) / median``.
One run made with ``--repeat N`` is its own repeats. ``mhabench.views.spread`` renders the result.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from mhabench.analysis.estimate import Row
from mhabench.analysis.speedup import speedup_rows
from mhabench.errors import InputError
from mhabench.results.columns import CASE_ID, IMPL, LATENCY_MS, REPEAT, STATUS
from mhabench.results.schema import RowStatus
from mhabench.results.store import Run

SPREAD_COLUMNS = [
    CASE_ID,
    "case",
    IMPL,
    "repeats",
    "latency_ms_by_repeat",
    LATENCY_MS,
    "latency_spread",
    "speedup",
    "speedup_spread",
]


def _finite(values: Any) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    return array[np.isfinite(array)]


def relative_range(values: Any) -> float:
    """``(max − min) / median`` of the finite values: how far apart repeats landed; NaN below two values."""
    finite = _finite(values)
    return float(np.ptp(finite) / np.median(finite)) if finite.size >= 2 else math.nan


def _median(values: Any) -> float:
    """Median of the finite values (a repeat whose baseline failed has no speedup); NaN when none."""
    finite = _finite(values)
    return float(np.median(finite)) if finite.size else math.nan


def spread_of(speedups: pd.DataFrame) -> pd.DataFrame:
    """Per (case_id, impl) over the repeats where it was ok, from rows :func:`speedup_rows` made: each repeat's
    median latency, the medians and relative ranges of latency and speedup over repeats, how many counted."""
    groups: dict[tuple[Any, Any], list[Row]] = {}
    for row in speedups.to_dict("records"):
        if row[STATUS] == RowStatus.OK and pd.notna(row.get(LATENCY_MS)):
            groups.setdefault((row[CASE_ID], row[IMPL]), []).append(row)
    return pd.DataFrame([_spread_line(rows) for rows in groups.values()], columns=SPREAD_COLUMNS)


def _spread_line(rows: list[Row]) -> dict[str, Any]:
    rows = sorted(rows, key=lambda row: row.get(REPEAT, 0))
    latency_ms, speedup = [float(row[LATENCY_MS]) for row in rows], [float(row["speedup"]) for row in rows]
    return {
        CASE_ID: rows[0][CASE_ID],
        "case": rows[0]["case"],
        IMPL: rows[0][IMPL],
        "repeats": len(rows),
        "latency_ms_by_repeat": latency_ms,
        LATENCY_MS: _median(latency_ms),
        "latency_spread": relative_range(latency_ms),
        "speedup": _median(speedup),
        "speedup_spread": relative_range(speedup),
    }


def repeat_count(frame: pd.DataFrame) -> int:
    """How many repeats the run has (1 for a run without ``--repeat``)."""
    return int(frame[REPEAT].nunique()) if REPEAT in frame.columns and len(frame) else 1


def runs_as_repeats(runs: list[Run]) -> pd.DataFrame:
    """The rows of ``runs`` with run *i* as repeat *i*; one run keeps its own repeats.

    Runs must measure the same (case, implementation) pairs, each once: anything else is not a
    repetition of one measurement.
    """
    if len(runs) == 1:
        return runs[0].frame
    frames = []
    for index, run in enumerate(runs):
        if not run.rows or len({row.case.repeat for row in run.rows}) > 1:
            raise InputError(f"{run.run_id}: spread over several runs needs runs with rows and without --repeat")
        frames.append(run.frame.assign(**{REPEAT: index}))
    keys = [set(zip(frame[CASE_ID], frame[IMPL], strict=True)) for frame in frames]
    for run, key in zip(runs[1:], keys[1:], strict=True):
        if key != keys[0]:
            raise InputError(f"{run.run_id}: measures other (case, implementation) pairs than {runs[0].run_id}")
    return pd.concat(frames, ignore_index=True)


def speedup_spread(frame: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per case and implementation but the baseline: the line of :func:`spread_of` plus ``speedup_by_repeat``,
    every repeat's speedup over ``baseline`` in repeat order (NaN where that repeat's row failed, so a
    reader sees the failure rather than a shorter list)."""
    present = sorted(set(frame[IMPL]))
    if baseline not in present:
        raise InputError(f"--baseline: {baseline!r} is not in these runs (they have {', '.join(present)})")
    speedups = speedup_rows(frame, baseline)
    lines = spread_of(speedups)
    lines = lines[lines[IMPL] != baseline]
    by_pair = {
        key: [float(v) for v in group.sort_values(REPEAT)["speedup"]]
        for key, group in speedups.groupby([CASE_ID, IMPL], sort=False)
    }
    per_repeat = [by_pair[(line[CASE_ID], line[IMPL])] for line in lines.to_dict("records")]
    return lines.assign(speedup_by_repeat=pd.Series(per_repeat, index=lines.index, dtype=object))
