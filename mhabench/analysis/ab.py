"""Two versions of a plugin measured in one run, in the same paired rounds: their change, judged.

``mhabench ab`` (:mod:`mhabench.run.ab`) runs ``name@base`` and ``name@candidate`` as two implementations of
every case, so each round times both back to back: whatever the machine does to one, it does to the other within
the round, and the paired ratio cancels it, as it does between any two implementations of a case. Several fresh
processes (replicates) each give one paired ratio per case; the change is read across them:

- **ratio**: candidate over base, the geometric mean of the processes' paired ratios (one process: its own);
- **interval**: the t interval over the processes' log ratios, which holds what moves between processes; one
  process: its paired bootstrap interval over rounds (:func:`mhabench.analysis.estimate.rows_ratio_by_process`);
- **p (Holm)**: the one-sample t test of those log ratios against 0 (no change), Holm-adjusted over the rows as
  compare's are; informative only (the verdict is the interval's); none below two processes;
- **verdict**: :func:`mhabench.analysis.verdict.judge_change`, the whole interval against the threshold, as every
  comparison; **counted work**: :mod:`mhabench.analysis.work_change`, exactly.

The result is a :class:`mhabench.analysis.compare.Comparison`, so ``compare``'s table, summary and gate read it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats

from mhabench.analysis import stats, work_change
from mhabench.analysis.compare import Comparison
from mhabench.analysis.estimate import is_ok, row_ratio, rows_ratio_by_process
from mhabench.analysis.verdict import Note, RowNote, Unjudged, judge_change, unjudged_row
from mhabench.results.columns import CASE_ID, IMPL, LATENCY_MS, REPEAT

Record = dict[str, Any]
VersionPair = tuple[str, str, str]
"""(plugin name, its base version's registry name, its candidate version's)."""


def compare_versions(
    frame: pd.DataFrame, pairs: Sequence[VersionPair], threshold: float, labels: tuple[str, str]
) -> Comparison:
    """One row per (case, plugin name): the candidate version over the base version, paired within each process
    and read across processes, judged against ``threshold``; ``labels`` name the two versions in the title."""
    rows = [
        _pair_row(records, pair, threshold)
        for _, group in frame.groupby(CASE_ID, sort=False)
        for records in [group.to_dict("records")]
        for pair in pairs
    ]
    rows = [row for row in rows if row is not None]
    for row, p_holm in zip(rows, stats.holm([row["p_value"] for row in rows]), strict=True):
        row["p_holm"] = p_holm
    return Comparison(labels[0], labels[1], pd.DataFrame(rows), [], threshold=threshold, same_rounds=True)


def no_change_p(ratios: Sequence[float]) -> float:
    """Two-sided p of the processes' log ratios under "no change" (mean 0): NaN below two processes or when every
    process gave the same ratio (no spread to test against)."""
    logs = np.log(ratios)
    if logs.size < 2 or np.ptp(logs) == 0 or not np.isfinite(logs).all():
        return math.nan
    return float(scipy.stats.ttest_1samp(logs, 0.0).pvalue)


def _pair_row(records: list[Record], pair: VersionPair, threshold: float) -> Record | None:
    name, base_name, candidate_name = pair
    base = {r.get(REPEAT): r for r in records if r[IMPL] == base_name}
    candidate = {r.get(REPEAT): r for r in records if r[IMPL] == candidate_name}
    if not base and not candidate:
        return None
    shown = next(iter((base or candidate).values()))
    row: Record = {
        **unjudged_row({CASE_ID: shown[CASE_ID]}, shown),
        IMPL: name,
        "p_holm": math.nan,
        "verdict": Unjudged.NOT_COMPARED.value,
    }
    processes = [p for p in base if p in candidate and is_ok(base[p]) and is_ok(candidate[p])]
    row["work_changes"] = work_change.changes(list(base.values()), list(candidate.values()))
    row["work_rise"] = max((change.relative for change in row["work_changes"]), default=0.0)
    if not processes:
        row["notes"] = (Note(RowNote.NO_SHARED_PROCESS, {"base_rows": len(base), "candidate_rows": len(candidate)}),)
        return row
    estimate = rows_ratio_by_process({p: candidate[p] for p in processes}, {p: base[p] for p in processes})
    row.update(
        p_value=no_change_p([row_ratio(candidate[p], base[p]).ratio for p in processes]),
        base_ms=_median([base[p][LATENCY_MS] for p in processes]),
        candidate_ms=_median([candidate[p][LATENCY_MS] for p in processes]),
        ratio=estimate.ratio,
        ci_low=estimate.ci_low,
        ci_high=estimate.ci_high,
        verdict=judge_change(estimate.ci_low, estimate.ci_high, threshold).value,
        notes=(Note(RowNote.SAME_ROUNDS, {"processes": len(processes), "of": len(base)}),),
    )
    return row


def _median(values: Sequence[Any]) -> float:
    return float(pd.Series([float(v) for v in values]).median())
