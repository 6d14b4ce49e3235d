"""``mhabench advise``: every rule over every run, in the order a reader wants the answers.

Per run and per case group (scenario): the group's answer, where the answer changes, why (from each case's own
columns), what to change; then what the run cannot tell. Each case's pick, and where its rows stand on the
roofline, are the run's record (:mod:`mhabench.analysis.answer`), which the views say directly. With several
runs, where their picks differ comes last. Computation only: ``mhabench.views.advice`` renders the result.

One rule lives here because it only quotes another module's finding, per case: ``energy per call``, where NVML
resolved it, each case's ok rows' J/call, tokens/J and power. Energy is read from a row's own windows
(``energy: windows``); a figure counts only under the rule of :mod:`mhabench.results.energy` (a window of at least
1 s, average power within the power limit × 1.02), which is applied here again, so a run written before that rule
(whose blocks read up to 1,580 W on a 700 W H100) says nothing about energy rather than something wrong.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from mhabench.analysis.advice.across import across, flips
from mhabench.analysis.advice.answers import RunAnswers, answer
from mhabench.analysis.advice.cases import MeasuredCase, groups_of
from mhabench.analysis.advice.caveats import caveats
from mhabench.analysis.advice.change import changes
from mhabench.analysis.advice.crossover import crossovers, group_answer
from mhabench.analysis.advice.why import why
from mhabench.analysis.answer import CalibrationUsed, Reason, RunAnswer, build
from mhabench.analysis.estimate import is_ok
from mhabench.analysis.speedup import DEFAULT_BASELINE
from mhabench.analysis.statement import DEVICE_KINDS, ENERGY, Question, Statement
from mhabench.errors import InputError
from mhabench.results.columns import IMPL
from mhabench.results.energy import EnergyReading, power_limit_of, reading
from mhabench.results.store import Run


@dataclasses.dataclass(frozen=True)
class RunAdvice:
    """One run's answers, its record (:mod:`mhabench.analysis.answer`) and every statement made about it beyond the
    record (each case's pick and its rows' roofline are the record's: ``mhabench.views.advice.statements``)."""

    answers: RunAnswers
    statements: tuple[Statement, ...]
    record: RunAnswer

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


def advise(
    runs: Sequence[Run],
    question: Question | None = None,
    calibrations: Sequence[CalibrationUsed | None] | None = None,
    notes: Sequence[Sequence[Reason]] | None = None,
    baseline: str = DEFAULT_BASELINE,
) -> Advice:
    """Advice on ``runs``; ``question`` names the device kind and implementations the reader asks about;
    ``calibrations``: per run, the between-process spread its answer is judged against (None: none, never looked
    up); ``notes``: per run, what the reader should know of its record (recomputed for an older folder)."""
    question = question or Question()
    if question.device_kind is not None and question.device_kind not in DEVICE_KINDS:
        raise InputError(f"--for: {question.device_kind!r} is not a device kind; use one of {', '.join(DEVICE_KINDS)}")
    answered = [answer(run) for run in runs]
    given = list(calibrations) if calibrations is not None else [None] * len(runs)
    said = list(notes) if notes is not None else [()] * len(runs)
    ran = [
        _run_advice(one, question, calibration, noted, baseline)
        for one, calibration, noted in zip(answered, given, said, strict=True)
    ]
    return Advice(tuple(ran), (*across(answered), *flips(answered)))


def _run_advice(
    answers: RunAnswers,
    question: Question,
    calibration: CalibrationUsed | None,
    notes: Sequence[Reason],
    baseline: str,
) -> RunAdvice:
    statements: list[Statement] = []
    environment = answers.environment
    for group, cases in groups_of(answers.cases).items():
        picks = [answers.picks[case.case_id] for case in cases]
        statements.append(group_answer(group, cases, answers.picks))
        statements += crossovers(cases, answers.picks)
        statements += [found for one in picks for found in why(one, environment)]
        statements += energy_statements(cases, environment)
        statements += changes(cases)
    run = answers.run
    spread = (calibration.between_process_spread, calibration.run_id) if calibration is not None else None
    statements += caveats(run.run_id, run.manifest, answers.cases, answers.picks, question, spread)
    record = build(answers, calibration, baseline, statements=statements, notes=notes)
    return RunAdvice(answers, tuple(statements), record)


# --- energy per call --------------------------------------------------------------------------------------------------

PER_CALL = "energy per call"


def energy_statements(cases: Sequence[MeasuredCase], environment: Mapping[str, Any]) -> list[Statement]:
    """Per case with at least one resolved row: those rows' energy, lowest J/call first."""
    limit = power_limit_of(environment)
    statements = []
    for case in cases:
        shown = [(str(row[IMPL]), reading(row, limit)) for row in case.rows if is_ok(row)]
        resolved = sorted(
            ((impl, one) for impl, one in shown if one.resolved), key=lambda item: item[1].energy_per_call_j or 0.0
        )
        if resolved:
            statements.append(_statement(case, resolved))
    return statements


def _statement(case: MeasuredCase, resolved: list[tuple[str, EnergyReading]]) -> Statement:
    figures = {
        impl: {
            "energy_per_call_j": one.energy_per_call_j,
            "tokens_per_joule": one.tokens_per_joule,
            "average_power_w": one.average_power_w,
            "energy_window_s": one.window_s,
            "energy_uncertainty": one.uncertainty,
        }
        for impl, one in resolved
    }
    return Statement(ENERGY, PER_CALL, case.group, case.label, figures)
