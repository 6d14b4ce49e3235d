"""``mhabench advise``: every rule over every run, in the order a reader wants the answers.

Per run and per case group (scenario): the group's answer, each case's pick, where the answer changes,
why (from each case's own columns), what to change; then what the run cannot tell. With several runs,
where their picks differ comes last. Computation only: ``mhabench.views.advice`` renders the result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from mhabench.analysis.advice.across import across
from mhabench.analysis.advice.answers import RunAnswers, answer
from mhabench.analysis.advice.calibrated import calibrated_caveats
from mhabench.analysis.advice.cases import groups_of
from mhabench.analysis.advice.caveats import caveats
from mhabench.analysis.advice.change import changes
from mhabench.analysis.advice.crossover import crossovers
from mhabench.analysis.advice.energy import energy_statements
from mhabench.analysis.advice.explained import explained
from mhabench.analysis.advice.flips import flips
from mhabench.analysis.advice.pick import statement
from mhabench.analysis.advice.statement import DEVICE_KINDS, Question, Statement
from mhabench.analysis.advice.summary import group_answer
from mhabench.analysis.advice.why import why
from mhabench.errors import InputError
from mhabench.results.store import Run


@dataclasses.dataclass(frozen=True)
class RunAdvice:
    """One run's answers and every statement made about it."""

    answers: RunAnswers
    statements: tuple[Statement, ...]

    @property
    def run_id(self) -> str:
        return self.answers.run.run_id


@dataclasses.dataclass(frozen=True)
class Advice:
    """What ``advise`` says: per run, then across the runs."""

    runs: tuple[RunAdvice, ...]
    across: tuple[Statement, ...]

    @property
    def statements(self) -> tuple[Statement, ...]:
        return (*(s for run in self.runs for s in run.statements), *self.across)


def advise(runs: Sequence[Run], question: Question | None = None) -> Advice:
    """Advice on ``runs``; ``question`` names the device kind and implementations the reader asks about."""
    question = question or Question()
    if question.device_kind is not None and question.device_kind not in DEVICE_KINDS:
        raise InputError(f"--for: {question.device_kind!r} is not a device kind; use one of {', '.join(DEVICE_KINDS)}")
    answered = [answer(run) for run in runs]
    return Advice(tuple(_run_advice(one, question) for one in answered), (*across(answered), *flips(answered)))


def _run_advice(answers: RunAnswers, question: Question) -> RunAdvice:
    statements: list[Statement] = []
    environment = answers.environment
    for group, cases in groups_of(answers.cases).items():
        picks = [answers.picks[case.case_id] for case in cases]
        statements.append(group_answer(group, cases, answers.picks))
        statements += [statement(one) for one in picks]
        statements += crossovers(cases, answers.picks)
        statements += [found for one in picks for found in why(one, environment)]
        statements += energy_statements(cases, environment)
        statements += explained(answers, cases)
        statements += changes(cases)
    run = answers.run
    statements += caveats(run.run_id, run.manifest, answers.cases, answers.picks, question)
    statements += calibrated_caveats(answers)
    return RunAdvice(answers, tuple(statements))
