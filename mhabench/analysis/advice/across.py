"""Across runs: where the pick differs between two devices, torch versions or commits, and by how much.

Each run is answered on its own (its rows were timed in its own rounds); then the runs are set side
by side: what differs between their manifests, each run's answer over all its cases, and, on the
cases both measured (matched on the shape fields, whatever the dtype), where the answers differ, with
each run's lead. Nothing is paired across runs: they are different processes on different machines.
"""

from __future__ import annotations

from collections.abc import Sequence

from mhabench.analysis.advice import wording
from mhabench.analysis.advice.answers import RunAnswers
from mhabench.analysis.advice.cases import Case
from mhabench.analysis.advice.pick import Pick
from mhabench.analysis.advice.statement import ACROSS, RowRef, Statement
from mhabench.analysis.advice.summary import counts_text
from mhabench.analysis.compare import manifest_differences
from mhabench.results.schema import DTYPE, SHAPE_FIELDS


def across(runs: Sequence[RunAnswers]) -> list[Statement]:
    """Nothing for one run; for several, the first is the one the others are set against."""
    if len(runs) < 2:
        return []
    first = runs[0]
    statements = [_differences(first, other) for other in runs[1:]]
    statements += [_run_answer(run) for run in runs]
    for other in runs[1:]:
        statements += _matched(first, other)
    return statements


def _refs(runs: RunAnswers, cases: Sequence[Case]) -> tuple[RowRef, ...]:
    return tuple(case.ref(impl) for case in cases for impl in runs.picks[case.case_id].impls)


def _differences(first: RunAnswers, other: RunAnswers) -> Statement:
    found = manifest_differences(first.run, other.run)
    named = [f"{d.field} {d.base} → {d.candidate}" for d in found if d.field != "timing"]
    named += ["timing settings"] if any(d.field == "timing" for d in found) else []
    said = "; ".join(named) if named else "nothing in their manifests"
    sentence = f"{other.run.run_id} against {first.run.run_id}: they differ in {said}."
    figures = {d.field: [d.base, d.candidate] for d in found}
    return Statement(ACROSS, "differences", "", other.run.run_id, sentence, figures, ())


def _run_answer(run: RunAnswers) -> Statement:
    sentence = f"on {run.device()}, run {run.run.run_id}: {counts_text(run.cases, run.picks)}."
    figures = {"cases": len(run.cases), "device": run.device()}
    return Statement(ACROSS, "run_answer", "", run.run.run_id, sentence, figures, _refs(run, run.cases))


def _shape(case: Case) -> tuple[str, ...]:
    return tuple(repr(case.fields[name]) for name in SHAPE_FIELDS)


def _lead(one: Pick) -> str:
    if one.estimate is None or one.runner_up is None:
        return one.phrase()
    return f"{one.phrase()}, {wording.ratio(one.estimate)} over {wording.impl(one.runner_up)}"


def _matched(first: RunAnswers, other: RunAnswers) -> list[Statement]:
    theirs = {_shape(case): case for case in first.cases}
    pairs = [(theirs[_shape(case)], case) for case in other.cases if _shape(case) in theirs]
    scope = f"{first.run.run_id} / {other.run.run_id}"
    if not pairs:
        sentence = (
            f"{other.run.run_id} and {first.run.run_id} share no case (matched on the shape fields): "
            "only their answers above can be set side by side."
        )
        return [Statement(ACROSS, "no_common_case", "", scope, sentence, {"matched": 0}, ())]
    differing = [(a, b) for a, b in pairs if first.picks[a.case_id].answer != other.picks[b.case_id].answer]
    statements = [_differs(first, other, a, b) for a, b in differing]
    same = len(pairs) - len(differing)
    if same:
        sentence = f"{same} of the {len(pairs)} cases both runs measured have the same answer on both."
        agreeing = [b for a, b in pairs if (a, b) not in differing]
        figures = {"matched": len(pairs), "same": same}
        statements.append(Statement(ACROSS, "same_pick", "", scope, sentence, figures, _refs(other, agreeing)))
    return statements


def _differs(first: RunAnswers, other: RunAnswers, ours: Case, theirs: Case) -> Statement:
    a, b = first.picks[ours.case_id], other.picks[theirs.case_id]
    dtypes = (
        f" ({ours.fields[DTYPE]} on the first, {theirs.fields[DTYPE]} on the second)"
        if ours.fields[DTYPE] != theirs.fields[DTYPE]
        else ""
    )
    sentence = (
        f"{ours.label}{dtypes}: the pick differs. On {first.device()}: {_lead(a)}; on {other.device()}: {_lead(b)}."
    )
    figures = {
        "first": {"run_id": first.run.run_id, "verdict": a.verdict, "impls": list(a.impls), "lead": _ratio(a)},
        "second": {"run_id": other.run.run_id, "verdict": b.verdict, "impls": list(b.impls), "lead": _ratio(b)},
    }
    refs = (*_refs(first, [ours]), *_refs(other, [theirs]))
    return Statement(ACROSS, "pick_differs", "", ours.label, sentence, figures, refs)


def _ratio(one: Pick) -> float | None:
    return one.estimate.ratio if one.estimate else None
