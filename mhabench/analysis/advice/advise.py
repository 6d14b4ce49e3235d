"""``mhabench advise``: every rule over every run, in the order a reader wants the answers.

Per run and per case group (scenario): the group's answer, each case's pick, where the answer changes,
why (from each case's own columns), what to change; then what the run cannot tell. With several runs,
where their picks differ comes last. Computation only: ``mhabench.views.advice`` renders the result.

Two rules live here because each only quotes another module's finding, per case:

- ``energy per call``: where NVML resolved it, each case's ok rows' J/call, tokens/J and power. Energy is read
  from a row's own windows (``energy: windows``); a figure counts only under the rule of
  :mod:`mhabench.results.energy` (a window of at least 1 s, average power within the power limit × 1.02), which
  is applied here again, so a run written before that rule (whose blocks read up to 1,580 W on a 700 W H100)
  says nothing about energy rather than something wrong.
- ``explained``: one line per clearly-slower implementation, citing ``mhabench explain`` (docs/stages.md). The
  explanation itself (stage, figures, rule) is :mod:`mhabench.analysis.explain`'s; advise quotes its stage and
  departure in one clause and names the command that says the rest. A row without a breakdown (an older run
  with no kernels.csv) gets no line: there is nothing to cite. (:mod:`mhabench.analysis.explain` reads advice's
  answers, so this rule sits above them, here, and not beside the other why rules.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from mhabench.analysis.advice import wording
from mhabench.analysis.advice.across import across, flips
from mhabench.analysis.advice.answers import RunAnswers, answer
from mhabench.analysis.advice.cases import MeasuredCase, groups_of
from mhabench.analysis.advice.caveats import caveats
from mhabench.analysis.advice.change import changes
from mhabench.analysis.advice.crossover import crossovers, group_answer
from mhabench.analysis.advice.pick import CANNOT_TELL, statement
from mhabench.analysis.advice.why import why
from mhabench.analysis.advice.wording import DEVICE_KINDS, ENERGY, WHY, Question, Statement
from mhabench.analysis.answer import CalibrationUsed, Reason, RunAnswer, build
from mhabench.analysis.estimate import is_ok
from mhabench.analysis.explain.explain import explain_answers
from mhabench.analysis.speedup import DEFAULT_BASELINE
from mhabench.errors import InputError
from mhabench.results.columns import IMPL
from mhabench.results.energy import EnergyReading, power_limit_of, reading
from mhabench.results.store import Run


@dataclasses.dataclass(frozen=True)
class RunAdvice:
    """One run's answers, its record (:mod:`mhabench.analysis.answer`) and every statement made about it."""

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
        statements += [statement(one) for one in picks]
        statements += crossovers(cases, answers.picks)
        statements += [found for one in picks for found in why(one, environment)]
        statements += energy_statements(cases, environment)
        statements += explained(answers, cases)
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
        resolved = sorted(((impl, one) for impl, one in shown if one.resolved), key=lambda item: _joules(item[1]))
        if resolved:
            statements.append(_statement(case, resolved))
    return statements


def _joules(one: EnergyReading) -> float:
    assert one.energy_per_call_j is not None
    return one.energy_per_call_j


def _statement(case: MeasuredCase, resolved: list[tuple[str, EnergyReading]]) -> Statement:
    parts = [f"{wording.impl(impl)} {_figures(one)}" for impl, one in resolved]
    sentence = f"{case.label}: {PER_CALL} (NVML windows, back-to-back calls): " + "; ".join(parts) + "."
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
    rows = tuple(case.ref(impl) for impl, _ in resolved)
    return Statement(ENERGY, PER_CALL, case.group, case.label, sentence, figures, rows)


def _figures(one: EnergyReading) -> str:
    """``0.301 J (13,600 tokens/J, 655 W; ±5 % over 2 s windows)``."""
    tokens = f"{one.tokens_per_joule:,.0f} tokens/J, " if one.tokens_per_joule is not None else ""
    error = f"±{one.uncertainty:.0%} " if one.uncertainty is not None else ""
    window = f"{error}over {one.window_s:.2g} s windows" if one.window_s is not None else ""
    return f"{one.energy_per_call_j:.3g} J ({tokens}{one.average_power_w:.0f} W; {window})"


# --- explained: citing mhabench explain -------------------------------------------------------------------------------

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
        by_median = " by its median (no interval)" if found.standing == CANNOT_TELL else ""
        text = f"{case.label}: `{found.impl}` is {found.slower_by:.3g}× slower{by_median}: {found.short} (`{command}`)."
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
