"""The table ``mhabench run`` prints: a row per case, a column per implementation, from the run's answer.

The field's convention (triton's ``perf_report``, FlashAttention's tables): a case is a row, an implementation a
column, and a cell is the implementation's median and its speedup over the baseline with the interval, on one line.
The pick is marked only where the record says winner (★); the members of a tie are marked as tied (=), so a tie
never reads as a win. The case column names only what the case's group sweeps (``n=512``), the rest is in the
group's title line. Every other column (memory, FLOP/B, efficiency, error, status) is in ``--wide``, the CSV and
``mhabench report``.

Cells shrink to the terminal, widest form first: median, speedup and interval; median and speedup; speedup alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mhabench.analysis.advice.cases import swept
from mhabench.analysis.answer import CaseAnswer, ImplAnswer, RunAnswer, Standing, Verdict
from mhabench.views.spelling import field, interval
from mhabench.views.table import TableModel, natural_width

MARKS = {Standing.PICK: "★", Standing.TIED: "="}
"""The pick of a winner, and each member of a tie (the fastest included)."""
LEGEND = (
    "cell: median ms, speedup vs {baseline} [95% interval]; ★ the pick (a clear winner), = tied (no clear winner); "
    "every column: --wide, the CSV, mhabench report"
)
FORMS = (("full", True), ("full", False), ("speedup", True), ("speedup", False), ("short", False))
"""The cell forms, widest first, each with or without the answer column (the marks say a winner and a tie)."""


def mark(case: CaseAnswer, one: ImplAnswer) -> str:
    """★ only on a winner, = on each member of a tie, nothing otherwise."""
    if case.verdict is Verdict.WINNER and one.standing is Standing.PICK:
        return MARKS[Standing.PICK]
    if case.verdict is Verdict.TIE and one.impl in case.tied:
        return MARKS[Standing.TIED]
    return ""


def cell(case: CaseAnswer, one: ImplAnswer | None, baseline: str, form: str) -> str:
    """``0.217 1.46× [1.45–1.48] ★``; the baseline's own cell is its median; ``-`` where it did not run ok."""
    if one is None or one.median_ms is None:
        return "-" if one is None else one.status
    parts = [] if form == "short" else [_milliseconds(one.median_ms)]
    estimate = one.vs_baseline
    if one.impl != baseline and estimate is not None and math.isfinite(estimate.ratio):
        bounds = estimate.interval
        shown = f" {interval(bounds.ci_low, bounds.ci_high)}" if estimate.has_interval else " [n/a]"
        parts.append(f"{estimate.ratio:.2f}×{shown if form == 'full' else ''}")
    elif form == "short":
        parts.append(_milliseconds(one.median_ms))
    return " ".join(parts) + (f" {mark(case, one)}" if mark(case, one) else "")


def _milliseconds(value_ms: float) -> str:
    """Three significant figures, trailing zeros kept (``1.00``, ``0.925``), whole milliseconds from 100."""
    return f"{value_ms:.0f}" if value_ms >= 100 else f"{value_ms:#.3g}"


def answer_word(case: CaseAnswer) -> str:
    if case.verdict is Verdict.WINNER:
        return str(case.pick)
    if case.verdict is Verdict.TIE:
        return "tie"
    return case.verdict.value.replace("_", " ")


def case_name(case: CaseAnswer, axes: Sequence[str]) -> str:
    """The fields the group sweeps (``n=512 causal``); the whole label where it sweeps none."""
    if not axes:
        return case.label
    return " ".join(field(name, case.fields.get(name)) for name in axes)


def answer_tables(record: RunAnswer, width: int | None = None) -> list[TableModel]:
    """One table per case group (scenario), each in the widest cell form ``width`` columns can show."""
    groups: dict[str, list[CaseAnswer]] = {}
    for case in record.cases:
        groups.setdefault(case.group, []).append(case)
    return [_fitted(record, group, cases, width) for group, cases in groups.items()]


def _fitted(record: RunAnswer, group: str, cases: list[CaseAnswer], width: int | None) -> TableModel:
    tables = [group_table(record, group, cases, form, answered) for form, answered in FORMS]
    if width is None:
        return tables[0]
    return next((table for table in tables if natural_width(table) <= width), tables[-1])


def group_table(
    record: RunAnswer, group: str, cases: Sequence[CaseAnswer], form: str = "full", answered: bool = True
) -> TableModel:
    """The cases of one group: a column per implementation, in the order the run measured them, and (``answered``)
    the answer in words."""
    impls = list(dict.fromkeys(one.impl for case in cases for one in case.impls))
    axes = swept(cases)
    headers = ["case", *impls, *(["answer"] if answered else [])]
    cells = [
        [
            case_name(case, axes),
            *(cell(case, case.impl(impl), record.baseline, form) for impl in impls),
            *([answer_word(case)] if answered else []),
        ]
        for case in cases
    ]
    fixed = _fixed_fields(cases[0], axes)
    over = ", across processes" if record.replicated else ""
    title = f"{group}{f' ({fixed})' if fixed else ''}: median ms, speedup vs {record.baseline}{over}"
    styles = ["winner" if case.verdict is Verdict.WINNER else "" for case in cases]
    return TableModel(title, headers, cells, [False, *([True] * len(impls)), *([False] if answered else [])], styles)


def _fixed_fields(case: CaseAnswer, axes: Sequence[str]) -> str:
    """The case's label without the swept fields: what every case of the group shares."""
    named = {field(name, case.fields.get(name)) for name in axes}
    return " ".join(word for word in case.label.split(" ") if word not in named)
