"""Across runs: where the pick differs between two devices, torch versions or commits, and by how much.

Each run is answered on its own (its rows were timed in its own rounds); then the runs are set side
by side: what differs between their manifests, each run's answer over all its cases, and, on the
cases every run measured, where the answers differ, with each run's lead. Cases match on the shape
fields and the dtype; only where each run measured a single dtype (one run in float16, another in
bfloat16) do they match on the shape alone, and the statements say so. Nothing is paired across
runs: they are different processes, perhaps on different machines. Several runs of one config on
one machine ask whether a pick reproduces.

Across several runs of one config: how many cases flip, the figure a replication target is stated in
(rule ``flips``). A case flips when a winner in one run is clearly slower in another: another run picked a
different winner, or a tie the first run's winner is not part of. Two runs that say "winner" and "tied with
it" do not flip (the second run could not separate what the first did, and contradicts nothing); a run
that "cannot tell" contradicts nothing either. The flip rate is the share of the cases every run
measured that flip; docs/findings/replication.md states its target in it. Runs are matched on
``case_id``, so this reads runs of one config (the question "does the answer replicate?").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mhabench.analysis.advice.answers import RunAnswers
from mhabench.analysis.advice.cases import MeasuredCase
from mhabench.analysis.advice.crossover import counts
from mhabench.analysis.advice.pick import TIED, WINNER, Pick
from mhabench.analysis.compare import manifest_differences
from mhabench.analysis.statement import ACROSS, Statement
from mhabench.results.columns import DTYPE, SHAPE_FIELDS


def across(runs: Sequence[RunAnswers]) -> list[Statement]:
    """Nothing for one run; for several, the first is the one the others' manifests are set against."""
    if len(runs) < 2:
        return []
    statements = [_differences(runs[0], other) for other in runs[1:]]
    statements += [_run_answer(run) for run in runs]
    return statements + _per_case(runs)


def _differences(first: RunAnswers, other: RunAnswers) -> Statement:
    found = manifest_differences(first.run, other.run)
    figures = {"against": first.run.run_id, "fields": {d.field: [d.base, d.candidate] for d in found}}
    return Statement(ACROSS, "differences", "", other.run.run_id, figures)


def _run_answer(run: RunAnswers) -> Statement:
    figures = {
        "cases": len(run.cases),
        "device": run.device(),
        "torch": run.environment.get("torch"),
        "counts": counts(run.cases, run.picks),
    }
    return Statement(ACROSS, "run_answer", "", run.run.run_id, figures)


def _fields(runs: Sequence[RunAnswers]) -> tuple[str, ...]:
    """The shape fields and the dtype; the shape alone where each run has one dtype and they differ (the
    same question asked in another precision), since matching on dtype would then match nothing."""
    dtypes = [{repr(case.fields[DTYPE]) for case in run.cases} for run in runs]
    by_shape = all(len(found) == 1 for found in dtypes) and len(set.union(*dtypes)) > 1
    return tuple(SHAPE_FIELDS) if by_shape else (*SHAPE_FIELDS, DTYPE)


def _per_case(runs: Sequence[RunAnswers]) -> list[Statement]:
    """Per case every run measured: one statement where the answers differ, one for all that agree."""
    fields = _fields(runs)
    by_key = [{tuple(repr(case.fields[name]) for name in fields): case for case in run.cases} for run in runs]
    common = [key for key in by_key[0] if all(key in cases for cases in by_key[1:])]
    scope = " / ".join(run.run.run_id for run in runs)
    if not common:
        return [Statement(ACROSS, "no_common_case", "", scope, {"matched": 0, "matched_on": list(fields)})]
    matched = [[cases[key] for cases in by_key] for key in common]
    differs = [len(_answers(runs, line)) > 1 for line in matched]
    statements = [_differs(runs, line) for line, differ in zip(matched, differs, strict=True) if differ]
    agreeing = [line for line, differ in zip(matched, differs, strict=True) if not differ]
    return statements + ([_agree(runs, agreeing, len(matched), scope, fields)] if agreeing else [])


def _answers(runs: Sequence[RunAnswers], line: Sequence[MeasuredCase]) -> set[tuple[str, tuple[str, ...]]]:
    return {run.picks[case.case_id].answer for run, case in zip(runs, line, strict=True)}


def _agree(
    runs: Sequence[RunAnswers],
    agreeing: Sequence[Sequence[MeasuredCase]],
    matched: int,
    scope: str,
    fields: Sequence[str],
) -> Statement:
    figures = {
        "matched": matched,
        "same": len(agreeing),
        "matched_on": list(fields),
        "cases": [line[0].label for line in agreeing],
    }
    return Statement(ACROSS, "same_pick", "", scope, figures)


def _answer(run: RunAnswers, one: Pick) -> dict[str, Any]:
    """One run's answer for a case, with its lead over the runner-up where it has one."""
    found = {
        "run_id": run.run.run_id,
        **one.figures(),
        "lead": one.estimate.ratio if one.estimate else None,
        "runner_up": one.runner_up,
    }
    if one.estimate is not None:
        found.update(ci_low=one.estimate.ci_low, ci_high=one.estimate.ci_high)
    return found


def _differs(runs: Sequence[RunAnswers], line: Sequence[MeasuredCase]) -> Statement:
    picks = [run.picks[case.case_id] for run, case in zip(runs, line, strict=True)]
    figures = {
        "dtypes": sorted({str(case.fields[DTYPE]) for case in line}),
        "answers": [_answer(run, one) for run, one in zip(runs, picks, strict=True)],
        "distinct_answers": len(_answers(runs, line)),
    }
    return Statement(ACROSS, "pick_differs", "", line[0].label, figures)


# --- flips: one config's runs set against each other ------------------------------------------------------------------

FLIPS = "flips"
NAMED = 4
"""How many flipped cases the statement names."""


def flips(runs: Sequence[RunAnswers]) -> list[Statement]:
    """One statement for two runs or more: the cases every run measured, how many flip, which."""
    if len(runs) < 2:
        return []
    common = [case_id for case_id in runs[0].picks if all(case_id in run.picks for run in runs[1:])]
    flipped = [case_id for case_id in common if flipped_case([run.picks[case_id] for run in runs])]
    figures = {
        "runs": len(runs),
        "cases": len(common),
        "flipped": len(flipped),
        "flip_rate": len(flipped) / len(common) if common else 0.0,
        "named": [
            {"case": runs[0].picks[case_id].case.label, "answers": [run.picks[case_id].figures() for run in runs]}
            for case_id in flipped[:NAMED]
        ],
    }
    scope = " / ".join(run.run.run_id for run in runs)
    return [Statement(ACROSS, FLIPS, "", scope, figures)]


def flipped_case(picks: Sequence[Pick]) -> bool:
    """Whether some run's winner is left out of another run's winner or tied set."""
    winners = {one.impls[0] for one in picks if one.verdict == WINNER}
    answered = [set(one.impls) for one in picks if one.verdict in (WINNER, TIED)]
    return any(winner not in chosen for winner in winners for chosen in answered)
