"""A run's answers: its cases and the pick of each, computed once and read by every other rule; and the pick
of a case measured in several processes (``replicates: N``), one answer across them.

A run of one process picks per repeat (``mhabench.analysis.advice.pick``), and ``--repeat`` passes
of one process that disagree make "cannot tell". Replicates are independent processes, so their
disagreement is the between-process spread itself, and the answer is read across them: the fastest
implementation is the one with the lowest geometric mean of its replicates' medians, and each other
row's lead over it is the per-replicate paired ratio combined across replicates
(:func:`mhabench.analysis.estimate.across_processes`: the t interval that holds both spreads).
The tie rule is the one-process rule (``pick.clearly_slower``), applied to that interval, and the
runner-up a pick quotes is the closest row: a tied one if any (a row whose median is large in one
process sorts behind others yet may be tied), else the smallest lead. Only the
replicates where both rows ran ok count; a lead resting on fewer than ``MIN_REPLICATES`` is "cannot
tell".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mhabench.analysis.advice.cases import MeasuredCase, Row, cases_of
from mhabench.analysis.advice.pick import (
    CANNOT_TELL,
    NOTHING,
    ONLY,
    TIED,
    TOO_FEW_PROCESSES,
    WINNER,
    Pick,
    clearly_slower,
    median_ms,
    pick,
)
from mhabench.analysis.estimate import MIN_REPLICATES, is_ok, rows_ratio_across
from mhabench.analysis.stats import RatioEstimate
from mhabench.results.columns import IMPL
from mhabench.results.store import Run


@dataclasses.dataclass(frozen=True)
class RunAnswers:
    """One run read for advice: its cases in run order and their picks by case_id."""

    run: Run
    cases: Sequence[MeasuredCase]
    picks: Mapping[str, Pick]

    @property
    def environment(self) -> Mapping[str, Any]:
        return self.run.manifest.environment

    def device(self) -> str:
        """``NVIDIA H100 80GB HBM3``: the device's name, else its kind ("" when the manifest records neither)."""
        return str(self.environment.get("device_name") or self.environment.get("device_kind") or "")


def answer(run: Run) -> RunAnswers:
    """The run's cases and picks: across processes for a replicated run, per repeat otherwise. Computed once per
    :class:`Run` (its rows do not change) and shared by every reader: the cases and picks are frozen."""
    cases, picks = run.derived(_cases_and_picks)
    return RunAnswers(run, cases, picks)


def _cases_and_picks(run: Run) -> tuple[Sequence[MeasuredCase], Mapping[str, Pick]]:
    """What :func:`answer` keeps with the run: nothing in it refers back to the run, so no reference cycle keeps a
    run's rows alive after its last reader."""
    cases = cases_of(run.run_id, run.frame, across_processes=run.manifest.replicated)
    pick_of = pick_replicated if run.manifest.replicated else pick
    return cases, {case.case_id: pick_of(case) for case in cases}


def pick_replicated(case: MeasuredCase) -> Pick:
    """The case's answer across its replicates (each of ``case.repeats`` is one process)."""
    by_impl = _ok_rows_by_impl(case.repeats)
    if not by_impl:
        return Pick(case, NOTHING, ())
    if len(by_impl) == 1:
        return Pick(case, ONLY, tuple(by_impl))
    fastest, leads = _fastest_with_leads(by_impl)
    others = list(leads)
    closest = min(others, key=lambda impl: (clearly_slower(leads[impl]), _finite_or_inf(leads[impl].ratio)))
    common = {"runner_up": closest, "estimate": leads[closest]}
    unknown = [impl for impl in others if not math.isfinite(leads[impl].ci_low)]
    if unknown:
        figures = {"impl": unknown[0], "needs": MIN_REPLICATES}
        return Pick(case, CANNOT_TELL, (fastest,), reason_code=TOO_FEW_PROCESSES, reason_figures=figures, **common)
    tied = (fastest, *(impl for impl in others if not clearly_slower(leads[impl])))
    return Pick(case, TIED if len(tied) > 1 else WINNER, tied, **common)


def _fastest_with_leads(by_impl: Mapping[str, Mapping[int, Row]]) -> tuple[str, dict[str, RatioEstimate]]:
    """The fastest implementation by the same paired, across-replicates ratios its leads are read in, and every
    other one's lead over it.

    Ordering by the replicates' medians alone can disagree with the paired ratios (one slow process moves a
    geometric mean of medians more than the per-process ratios), and then a "runner-up" could be clearly
    *faster* than the pick while the pick reads as a tie. So the order is the paired ratio against a common
    reference, and should one lead still come out clearly below 1 (paired estimates are medians of per-round
    ratios, not exactly transitive) the faster one is taken as the pick and the leads are read again."""
    reference = min(by_impl, key=lambda impl: _typical_ms(by_impl[impl].values()))
    leads = _leads_over(reference, by_impl)
    fastest = min(by_impl, key=lambda impl: 1.0 if impl == reference else _finite_or_inf(leads[impl].ratio))
    if fastest != reference:
        leads = _leads_over(fastest, by_impl)
    for _ in range(len(by_impl)):
        faster = [impl for impl, lead in leads.items() if lead.ci_high < 1.0]
        if not faster:
            break
        fastest = min(faster, key=lambda impl: leads[impl].ratio)
        leads = _leads_over(fastest, by_impl)
    return fastest, leads


def _leads_over(fastest: str, by_impl: Mapping[str, Mapping[int, Row]]) -> dict[str, RatioEstimate]:
    """Every other implementation's across-replicates lead over ``fastest``."""
    return {
        impl: rows_ratio_across(rows, by_impl[fastest]).interval for impl, rows in by_impl.items() if impl != fastest
    }


def _finite_or_inf(value: float) -> float:
    return value if math.isfinite(value) else math.inf


def _ok_rows_by_impl(repeats: Sequence[Sequence[Row]]) -> dict[str, dict[int, Row]]:
    """Each implementation's ok rows by replicate, implementations in first-seen order."""
    found: dict[str, dict[int, Row]] = {}
    for replicate, rows in enumerate(repeats):
        for row in rows:
            if is_ok(row):
                found.setdefault(str(row[IMPL]), {})[replicate] = row
    return found


def _typical_ms(rows: Any) -> float:
    """The geometric mean of the replicates' medians: the order "fastest" is read in (+inf when none is finite)."""
    medians = [median_ms(row) for row in rows]
    finite = [m for m in medians if math.isfinite(m) and m > 0]
    return float(np.exp(np.mean(np.log(finite)))) if finite else math.inf
