"""A run's answer as one typed record, computed once, that every view reads.

Per case the verdict, the pick, every implementation's estimate against the pick and the baseline, why (bound,
efficiency, executed ×, where the bytes come from), and caveats as reason codes with their numbers; plus where the
answer changes and the run-wide caveats.

Every view reads this record: the run's table marks a pick only where a case's verdict is ``winner`` (a tie is
shown as a tie), ``advise --format json`` is the record itself (:meth:`RunAnswer.record`, schema in
docs/advise.md), and the run folder keeps it as ``answers.json`` (:mod:`mhabench.results.answers`). No I/O here:
the calibration an answer uses is given, never looked up.

The decisions are :mod:`mhabench.analysis.advice`'s: one pick rule (``pick.pick``, ``answers.pick_replicated``
across processes), one estimator (:mod:`mhabench.analysis.estimate`).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from mhabench.analysis.advice import pick as picking
from mhabench.analysis.advice import thresholds
from mhabench.analysis.advice.answers import RunAnswers, answer
from mhabench.analysis.advice.cases import MeasuredCase, groups_of
from mhabench.analysis.advice.caveats import caveats
from mhabench.analysis.advice.crossover import crossovers
from mhabench.analysis.advice.pick import Pick, clearly_slower
from mhabench.analysis.advice.thresholds import TIE_MARGIN
from mhabench.analysis.advice.why import Why, why_of
from mhabench.analysis.estimate import MIN_PAIRED_ROUNDS, MIN_REPLICATES, Estimate, is_ok, row_ratio, rows_ratio_across
from mhabench.analysis.speedup import DEFAULT_BASELINE
from mhabench.analysis.statement import CAVEAT, CROSSOVER, Question, Statement
from mhabench.analysis.stats import CONFIDENCE_LEVEL, MIN_INTERVAL_SAMPLES
from mhabench.errors import UnknownImplementationError
from mhabench.impls import get_spec
from mhabench.results.calibration import Calibration
from mhabench.results.cells import number, text
from mhabench.results.columns import CASE_ID, DTYPE, IMPL, LATENCY_MS, MAX_REL_ERR, STATUS
from mhabench.results.store import Run

SCHEMA_VERSION = 2
"""The version of the record's layout (``answers.json``, ``advise --format json``); docs/advise.md describes it."""


class Verdict(str, enum.Enum):
    """What a case's answer is."""

    WINNER = "winner"
    TIE = "tie"
    CANNOT_TELL = "cannot_tell"
    ONLY = "only"
    NOTHING_RAN = "nothing_ran"

    __str__ = str.__str__


VERDICTS = {
    picking.WINNER: Verdict.WINNER,
    picking.TIED: Verdict.TIE,
    picking.CANNOT_TELL: Verdict.CANNOT_TELL,
    picking.ONLY: Verdict.ONLY,
    picking.NOTHING: Verdict.NOTHING_RAN,
}


class Standing(str, enum.Enum):
    """How one implementation stands in its case."""

    PICK = "pick"
    """The winner, the only row that ran, or (tie, cannot tell) the row with the lowest median."""
    TIED = "tied"
    SLOWER = "slower"
    """Clearly slower than the pick (or the fastest row)."""
    UNKNOWN = "unknown"
    """Slower by its median, but the data cannot say how surely (no interval, rounds that disagree)."""
    NOT_OK = "not_ok"

    __str__ = str.__str__


@dataclasses.dataclass(frozen=True)
class Reason:
    """A caveat or a reason, by code (docs/advise.md lists each), with its numbers; ``scope`` is what it is about
    (a case label, a line of a sweep, the run)."""

    code: str
    numbers: Mapping[str, Any]
    scope: str = ""


@dataclasses.dataclass(frozen=True)
class ImplAnswer:
    """One implementation of a case: its status and median, how it stands, its time over the pick's
    (``vs_pick``: ≥ 1 for a slower row) and the baseline's time over its own (``vs_baseline``: a speedup)."""

    impl: str
    status: str
    median_ms: float | None
    standing: Standing
    vs_pick: Estimate | None
    vs_baseline: Estimate | None
    why: Why | None
    compute_dtype: str | None
    """The dtype it computes in where that is not the case's (registered ``compute_dtype``)."""
    max_rel_err: float | None
    """Its largest relative error against the reference (None where it did not run ok)."""


@dataclasses.dataclass(frozen=True)
class CaseAnswer:
    """The answer for one case. ``pick``: the winner or the only row that ran, else None; ``tied``: the tied set
    (fastest first); ``fastest``: the row with the lowest median (what a tie or "cannot tell" rests on);
    ``lead``: the fastest row's lead over ``runner_up``; ``reason``: why "cannot tell", or the exception a winner
    rests on (``dominance``)."""

    case_id: str
    label: str
    group: str
    dtype: str
    fields: Mapping[str, Any]
    verdict: Verdict
    pick: str | None
    tied: tuple[str, ...]
    fastest: str | None
    runner_up: str | None
    lead: Estimate | None
    reason: Reason | None
    impls: tuple[ImplAnswer, ...]

    def impl(self, name: str) -> ImplAnswer | None:
        return next((one for one in self.impls if one.impl == name), None)


@dataclasses.dataclass(frozen=True)
class Crossover:
    """Where a line's answer changes: along ``axis`` with ``fixed`` held, between the measured values."""

    group: str
    axis: str
    fixed: Mapping[str, Any]
    changes_between: tuple[tuple[Any, Any], ...]
    segments: tuple[Mapping[str, Any], ...]


@dataclasses.dataclass(frozen=True)
class CalibrationUsed:
    """The between-process spread an answer was judged against, where it came from and when it was measured."""

    between_process_spread: float
    run_id: str
    measured_at: str
    fingerprint: str
    source: str
    """``recorded`` (kept in the run folder when the run ended) or ``file`` (``--calibration FILE``)."""

    @classmethod
    def from_record(cls, found: Mapping[str, Any] | None) -> CalibrationUsed | None:
        """The calibration a kept record names (None where it names none or is not readable as one)."""
        try:
            return cls(**{field.name: found[field.name] for field in dataclasses.fields(cls)}) if found else None
        except (KeyError, TypeError):
            return None

    @classmethod
    def of(cls, calibration: Calibration, source: str) -> CalibrationUsed:
        return cls(
            calibration.between_process_spread,
            calibration.run_id,
            calibration.measured_at,
            calibration.fingerprint_key,
            source,
        )


@dataclasses.dataclass(frozen=True)
class RunAnswer:
    """One run's answer: its cases, where the answer changes, what the run cannot tell."""

    run_id: str
    device: str
    device_kind: str
    torch: str
    status: str
    replicated: bool
    baseline: str
    calibration: CalibrationUsed | None
    cases: tuple[CaseAnswer, ...]
    crossovers: tuple[Crossover, ...]
    caveats: tuple[Reason, ...]
    notes: tuple[Reason, ...] = ()
    """About the record itself (``recomputed``: an older folder without answers.json, read again now)."""

    def with_picks(self, rows: pd.DataFrame) -> pd.DataFrame:
        """``rows`` (with ``case_id`` and ``impl``) plus ``pick``: ``winner`` on each winner's rows, ``tie`` on each
        member of a tie, "" elsewhere: what a table marks, and the only rows it may mark."""
        marks = {(one.case_id, one.pick): Verdict.WINNER.value for one in self.cases if one.verdict is Verdict.WINNER}
        marks.update({(one.case_id, impl): Verdict.TIE.value for one in self.cases for impl in one.tied})
        keys = zip(rows[CASE_ID].astype(str), rows[IMPL].astype(str), strict=True)
        return rows.assign(pick=[marks.get(key, "") for key in keys])

    def record(self) -> dict[str, Any]:
        """JSON-ready: enums as their values, NaN and infinities as null; with the thresholds it was decided by."""
        return {"schema_version": SCHEMA_VERSION, **plain(dataclasses.asdict(self)), "thresholds": thresholds_record()}


def thresholds_record() -> dict[str, Any]:
    """Every number the rules decide by (docs/advise.md), so a consumer knows what "tied" meant: each constant
    of :mod:`mhabench.analysis.advice.thresholds`, read from the module so a new one cannot be left out, and
    the interval rules the picks take from the estimator."""
    own = {name.lower(): value for name, value in vars(thresholds).items() if name.isupper()}
    return {
        "confidence_level": CONFIDENCE_LEVEL,
        "min_interval_samples": MIN_INTERVAL_SAMPLES,
        "min_paired_rounds": MIN_PAIRED_ROUNDS,
        "min_replicates": MIN_REPLICATES,
        **own,
    }


def plain(value: Any) -> Any:
    """A value as JSON holds it, at any depth: enums their values, NaN and infinities null, numpy scalars numbers."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(name): plain(item) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, bool | int | str) or value is None:
        return value
    try:
        number_value = float(value)
    except (TypeError, ValueError):
        return str(value)
    return plain(number_value) if not float(number_value).is_integer() else int(number_value)


# --- computing it ---------------------------------------------------------------------------------------------------


def answer_run(run: Run, calibration: CalibrationUsed | None = None, baseline: str = DEFAULT_BASELINE) -> RunAnswer:
    """The run's answer, judged against ``calibration`` (None: the run records none, and none was given)."""
    return build(answer(run), calibration, baseline)


def build(
    answers: RunAnswers,
    calibration: CalibrationUsed | None,
    baseline: str = DEFAULT_BASELINE,
    statements: Sequence[Statement] | None = None,
    notes: Sequence[Reason] = (),
) -> RunAnswer:
    """The record of a run already read for advice; ``statements``: the crossovers and caveats advise made of it
    (made here when not given)."""
    run = answers.run
    environment = answers.environment
    if statements is None:
        spread = (calibration.between_process_spread, calibration.run_id) if calibration is not None else None
        statements = [
            *(found for cases in groups_of(answers.cases).values() for found in crossovers(cases, answers.picks)),
            *caveats(run.run_id, run.manifest, answers.cases, answers.picks, Question(), spread),
        ]
    return RunAnswer(
        run_id=run.run_id,
        device=answers.device(),
        device_kind=str(environment.get("device_kind") or ""),
        torch=str(environment.get("torch") or ""),
        status=str(run.manifest.status or "complete"),
        replicated=bool(run.manifest.replicated),
        baseline=baseline,
        calibration=calibration,
        cases=tuple(case_answer(case, answers.picks[case.case_id], baseline) for case in answers.cases),
        crossovers=tuple(_crossover(s) for s in statements if s.kind == CROSSOVER and s.rule == "crossover"),
        caveats=tuple(Reason(s.rule, dict(s.figures), s.scope) for s in statements if s.kind == CAVEAT),
        notes=tuple(notes),
    )


def _crossover(statement: Statement) -> Crossover:
    figures = statement.figures
    return Crossover(
        statement.group,
        str(figures["axis"]),
        dict(figures["fixed"]),
        tuple((low, high) for low, high in figures["changes_between"]),
        tuple(dict(segment) for segment in figures["segments"]),
    )


def case_answer(case: MeasuredCase, one: Pick, baseline: str) -> CaseAnswer:
    """One case's record from its pick."""
    verdict = VERDICTS[picking.PickVerdict(one.verdict)]
    fastest = one.impls[0] if one.impls else None
    chosen = fastest if verdict in (Verdict.WINNER, Verdict.ONLY) else None
    lead = _lead(case, one)
    reason = Reason(one.reason_code, dict(one.reason_figures), case.label) if one.reason_code else None
    impls = tuple(_impl_answer(case, str(row[IMPL]), one, fastest, baseline) for row in case.rows)
    return CaseAnswer(
        case_id=case.case_id,
        label=case.label,
        group=case.group,
        dtype=str(case.fields.get(DTYPE) or ""),
        fields=dict(case.fields),
        verdict=verdict,
        pick=chosen,
        tied=tuple(one.impls) if verdict is Verdict.TIE else (),
        fastest=fastest,
        runner_up=one.runner_up,
        lead=lead,
        reason=reason,
        impls=impls,
    )


def _lead(case: MeasuredCase, one: Pick) -> Estimate | None:
    """The pick's lead over its runner-up as the estimator gives it (method, rounds, processes)."""
    if not one.impls or one.runner_up is None:
        return None
    return _ratio(case, one.runner_up, one.impls[0])


def _ratio(case: MeasuredCase, numerator: str, denominator: str) -> Estimate | None:
    """``numerator``'s time over ``denominator``'s: within the case's first repeat, or across its processes."""
    if case.across_processes and len(case.repeats) > 1:
        top, bottom = _by_process(case, numerator), _by_process(case, denominator)
        return rows_ratio_across(top, bottom) if top and bottom else None
    rows = {str(row[IMPL]): row for row in case.repeats[0]}
    top, bottom = rows.get(numerator), rows.get(denominator)
    if top is None or bottom is None or not (is_ok(top) and is_ok(bottom)):
        return None
    return row_ratio(top, bottom)


def _by_process(case: MeasuredCase, impl: str) -> dict[int, Mapping[str, Any]]:
    return {
        process: row
        for process, rows in enumerate(case.repeats)
        for row in rows
        if str(row[IMPL]) == impl and is_ok(row)
    }


def _impl_answer(case: MeasuredCase, impl: str, one: Pick, fastest: str | None, baseline: str) -> ImplAnswer:
    row = case.row(impl) or {}
    ok = is_ok(row)
    vs_pick = _ratio(case, impl, fastest) if ok and fastest and impl != fastest else None
    vs_baseline = _ratio(case, baseline, impl) if ok else None
    median = number(row, LATENCY_MS) if ok else None
    return ImplAnswer(
        impl=impl,
        status=text(row, STATUS),
        median_ms=median,
        standing=_standing(case, impl, ok, one, fastest, vs_pick),
        vs_pick=vs_pick,
        vs_baseline=vs_baseline,
        why=why_of(row) if ok else None,
        compute_dtype=compute_dtype(impl),
        max_rel_err=number(row, MAX_REL_ERR) if ok else None,
    )


def _standing(
    case: MeasuredCase, impl: str, ok: bool, one: Pick, fastest: str | None, vs_pick: Estimate | None
) -> Standing:
    """Where the case cannot tell, a row is still clearly slower by the pick's own rule for one row (its interval,
    or without one the dominance exception); otherwise slower by its median only."""
    if not ok:
        return Standing.NOT_OK
    if impl == fastest:
        return Standing.PICK
    if impl in one.impls:
        return Standing.TIED
    if one.verdict == picking.CANNOT_TELL:
        return Standing.SLOWER if _clearly_slower(case, impl, fastest, vs_pick) else Standing.UNKNOWN
    return Standing.SLOWER


def _clearly_slower(case: MeasuredCase, impl: str, fastest: str | None, vs_pick: Estimate | None) -> bool:
    if vs_pick is None or fastest is None:
        return False
    if vs_pick.has_interval or case.across_processes:
        return clearly_slower(vs_pick.interval)
    rows = (case.row(fastest), case.row(impl))
    return rows[0] is not None and rows[1] is not None and picking.standing(vs_pick.interval, *rows) == picking.SLOWER


def compute_dtype(impl: str) -> str | None:
    """The registered dtype an implementation computes in when it is not its case's; None otherwise or unknown."""
    try:
        return get_spec(impl).compute_dtype
    except UnknownImplementationError:
        return None


def slower_by_median(case: CaseAnswer, impl: str) -> bool:
    """Whether ``impl`` is at least ``TIE_MARGIN`` slower than the case's fastest row by its median ratio."""
    found = case.impl(impl)
    return bool(found and found.vs_pick and found.vs_pick.ratio >= 1 + TIE_MARGIN)
