"""A measured case's pick and roofline as advise says them: from the case's answer record (the views' own path)."""

from __future__ import annotations

from mhabench.analysis.advice.cases import MeasuredCase
from mhabench.analysis.advice.pick import Pick, pick
from mhabench.analysis.answer import case_answer
from mhabench.analysis.speedup import DEFAULT_BASELINE
from mhabench.analysis.statement import Statement
from mhabench.views.advice import pick_statement, roofline_statement


def statement(found: Pick) -> Statement:
    """The pick's statement, said from the record of its case."""
    return pick_statement(case_answer(found.case, found, DEFAULT_BASELINE))


def roofline(case: MeasuredCase, impl: str) -> Statement | None:
    """Where ``impl``'s row of ``case`` stands on its roofline, said from the record of the case."""
    return roofline_statement(case_answer(case, pick(case), DEFAULT_BASELINE), impl)
