"""advise's one line per clearly-slower implementation, citing ``mhabench explain`` (docs/stages.md).

The explanation itself (stage, figures, rule) is :mod:`mhabench.analysis.explain`'s; advise quotes its stage and
departure in one clause and names the command that says the rest. A row without a breakdown (an older run with no
kernels.csv) gets no line: there is nothing to cite.
"""

from __future__ import annotations

from collections.abc import Sequence

from mhabench.analysis.advice.answers import RunAnswers
from mhabench.analysis.advice.cases import MeasuredCase
from mhabench.analysis.advice.statement import WHY, Statement
from mhabench.analysis.explain.explain import explain_answers

EXPLAINED = "explained"
"""The rule name of these statements."""


def explained(answers: RunAnswers, cases: Sequence[MeasuredCase]) -> list[Statement]:
    """One statement per clearly-slower implementation of ``cases`` that has a breakdown."""
    by_id = {case.case_id: case for case in cases}
    statements = []
    for found in explain_answers(answers, tuple(by_id)):
        if found.stage is None:
            continue
        case = by_id[found.case_id]
        command = f"mhabench explain {answers.run.run_id} --impl {found.impl}"
        text = f"{case.label}: `{found.impl}` is {found.slower_by:.3g}× slower: {found.short} (`{command}`)."
        figures = {
            "stage": found.stage.stage,
            "time_share": found.stage.time_share,
            "flops_ratio": found.stage.flops_ratio,
            "bytes_ratio": found.stage.bytes_ratio,
            "explain_rule": found.rule,
            "breakdown_source": found.source,
        }
        rows = (case.ref(found.impl), case.ref(found.pick))
        statements.append(Statement(WHY, EXPLAINED, case.group, case.label, text, figures, rows))
    return statements
