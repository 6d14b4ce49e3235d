"""What a run cannot tell: the limits every answer above it carries, each naming the rows it concerns.

- ``noisy``: ok rows whose IQR is above the run's noise threshold (their medians move between runs);
- ``capped``: ok rows that spent ``max_run_time_s`` before their samples were complete;
- ``no_interval``: cases whose pick is "cannot tell" (too few rounds, repeats that disagree);
- ``drift``: the reference workload moved more than the noise threshold during the run;
- ``unfinished``: a run that did not complete has cases nobody measured;
- ``other_device``: a run measured on one kind of device asked about another (``--for``);
- ``not_measured``: an implementation asked about (``--impl``) that the run does not have;
- ``mixed_devices``: the run's cases were measured on more than one device (a cluster run);
- ``did_not_run``: rows that failed for another reason than memory (mismatch, unsupported, error, …);
- ``may_not_replicate`` or ``uncalibrated`` (one rule, :func:`one_process`): a one-process run's winners against
  the machine's calibrated between-process spread, or, where the machine has none, that nothing says whether
  they replicate and how to measure it.

Clock throttling during a round is not recorded by any run yet, so no rule can report it.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from mhabench.analysis.advice.cases import MeasuredCase, Row
from mhabench.analysis.advice.pick import CANNOT_TELL, WINNER, Pick
from mhabench.analysis.advice.why import DID_NOT_FIT
from mhabench.analysis.device_mix import CASE_ID, DEVICE_ID, run_device_mix
from mhabench.analysis.estimate import is_ok
from mhabench.analysis.statement import CAVEAT, Question, Statement
from mhabench.analysis.verdict import Change, judge_change
from mhabench.results.cells import flag, number, text
from mhabench.results.columns import CAPPED, ERROR, IMPL, STATUS, noisy
from mhabench.results.fingerprint import Fingerprint
from mhabench.results.manifest import Manifest

NO_INTERVAL, MAY_NOT_REPLICATE, UNCALIBRATED = "no_interval", "may_not_replicate", "uncalibrated"
"""The rule names of the caveats that say an answer itself may not hold (or that nothing says it holds), which
the run's short answer puts first."""
NAMED_ROWS = 4
"""How many rows (cases, picks) a caveat names in its figures; its ``rows`` hold every one."""


def caveats(
    run_id: str,
    manifest: Manifest,
    cases: Sequence[MeasuredCase],
    picks: Mapping[str, Pick],
    question: Question,
    spread: tuple[float, str] | None = None,
) -> list[Statement]:
    """Every caveat of one run, the run-wide ones first; ``spread``: the machine's between-process spread and the
    calibration run it comes from, as the run recorded it or the reader gave it (None: none)."""
    rows = [(case, row) for case in cases for repeat in case.repeats for row in repeat]
    found = [
        _drift(run_id, manifest),
        _unfinished(run_id, manifest),
        _other_device(run_id, manifest, question),
        _not_measured(run_id, rows, question),
        _flagged(run_id, "noisy", [(c, r) for c, r in rows if is_ok(r) and noisy(r)]),
        _flagged(run_id, "capped", [(c, r) for c, r in rows if is_ok(r) and flag(r.get(CAPPED))]),
        _no_interval(run_id, cases, picks),
        _mixed_devices(run_id, rows),
        *_did_not_run(run_id, rows),
        one_process(run_id, manifest, cases, picks, spread),
    ]
    return [statement for statement in found if statement is not None]


def _statement(run_id: str, rule: str, figures: Mapping[str, Any]) -> Statement:
    return Statement(CAVEAT, rule, "", run_id, figures)


def _flagged(run_id: str, rule: str, rows: Sequence[tuple[MeasuredCase, Row]]) -> Statement | None:
    if not rows:
        return None
    named = [{"impl": str(row[IMPL]), "case": case.label} for case, row in rows[:NAMED_ROWS]]
    return _statement(run_id, rule, {"rows": len(rows), "named": named})


def _drift(run_id: str, manifest: Manifest) -> Statement | None:
    drift = manifest.drift or {}
    if not drift.get("exceeded"):
        return None
    figures = {
        "drift": number(drift, "drift") or 0.0,
        "workload": drift.get("workload"),
        "reference_ms": list(drift.get("reference_ms") or []),
    }
    return _statement(run_id, "drift", figures)


def _mixed_devices(run_id: str, rows: Sequence[tuple[MeasuredCase, Row]]) -> Statement | None:
    """The run's cases ran on more than one device (:mod:`mhabench.analysis.device_mix`): what crosses cases mixes
    devices, and a case split between devices pairs rounds of different ones."""
    ok = [dict(row) for _, row in rows if is_ok(row)]
    mix = run_device_mix(pd.DataFrame(ok, columns=[CASE_ID, DEVICE_ID]))
    if mix is None:
        return None
    figures = {"devices": dict(mix.rows_per_device), "split_cases": list(mix.split_cases)}
    return _statement(run_id, mix.code.value, figures)


def _unfinished(run_id: str, manifest: Manifest) -> Statement | None:
    status = manifest.status or "complete"
    if status == "complete":
        return None
    return _statement(run_id, "unfinished", {"status": status})


def _other_device(run_id: str, manifest: Manifest, question: Question) -> Statement | None:
    environment = manifest.environment
    measured_on = str(environment.get("device_kind") or "")
    if question.device_kind is None or question.device_kind == measured_on:
        return None
    figures = {"asked": question.device_kind, "measured_on": measured_on, "device_name": environment.get("device_name")}
    return _statement(run_id, "other_device", figures)


def _not_measured(run_id: str, rows: Sequence[tuple[MeasuredCase, Row]], question: Question) -> Statement | None:
    present = {str(row[IMPL]) for _, row in rows}
    missing = [impl for impl in question.impls if impl not in present]
    if not missing:
        return None
    return _statement(run_id, "not_measured", {"missing": missing, "present": sorted(present)})


def _no_interval(run_id: str, cases: Sequence[MeasuredCase], picks: Mapping[str, Pick]) -> Statement | None:
    unknown = [picks[case.case_id] for case in cases if picks[case.case_id].verdict == CANNOT_TELL]
    if not unknown:
        return None
    named = [
        {
            "case": one.case.label,
            "fastest": one.impls[0],
            "reason_code": one.reason_code,
            "reason_figures": dict(one.reason_figures),
        }
        for one in unknown[:NAMED_ROWS]
    ]
    figures = {"cases": len(unknown), "of": len(cases), "named": named}
    return _statement(run_id, NO_INTERVAL, figures)


def _did_not_run(run_id: str, rows: Sequence[tuple[MeasuredCase, Row]]) -> list[Statement]:
    """Failed rows other than the memory ones (the why rule ``did_not_fit`` has those), by implementation and status."""
    failed: dict[tuple[str, str], list[tuple[MeasuredCase, Row]]] = collections.defaultdict(list)
    for case, row in rows:
        status = text(row, STATUS)
        if status not in ("ok", "", *DID_NOT_FIT):
            failed[(str(row[IMPL]), status)].append((case, row))
    statements = []
    for (impl, status), held in failed.items():
        figures = {
            "impl": impl,
            "status": status,
            "rows": len(held),
            "case": held[0][0].label,
            "error": text(held[0][1], ERROR),
        }
        statements.append(_statement(run_id, "did_not_run", figures))
    return statements


# --- one process: does the answer replicate? ------------------------------------------------------------------------


def one_process(
    run_id: str,
    manifest: Manifest,
    cases: Sequence[MeasuredCase],
    picks: Mapping[str, Pick],
    spread: tuple[float, str] | None,
) -> Statement | None:
    """The one caveat on a one-process run's winners: ``may_not_replicate`` for those whose lead is within the
    machine's calibrated between-process spread (none when every lead clears it), ``uncalibrated`` for all of
    them when the machine has no calibration. A replicated run gets neither: its picks are read across its
    processes already. Only cases measured once count, as in the two rules this one replaced (a ``--repeat``
    case's passes, though in one process, had to agree to make a winner); a lead without a finite interval has
    nothing to widen and is not named."""
    if manifest.replicated:
        return None
    winners = [
        one
        for case in cases
        if len(case.repeats) == 1
        and (one := picks[case.case_id]).verdict == WINNER
        and one.estimate is not None
        and math.isfinite(one.estimate.ci_low)
    ]
    if not winners:
        return None
    fingerprint = Fingerprint.of(manifest.environment)
    if spread is None:
        return _uncalibrated(run_id, manifest, fingerprint, winners)
    fragile = [one for one in winners if not replicates(one, spread[0])]
    return _may_not_replicate(run_id, spread, fingerprint, fragile) if fragile else None


def replicates(one: Pick, spread: float) -> bool:
    """Whether the winner's lead stays above 1 with its interval widened by ``spread``."""
    assert one.estimate is not None
    return judge_change(one.estimate.ci_low, one.estimate.ci_high, 0.0, spread) is Change.SLOWER


def _uncalibrated(run_id: str, manifest: Manifest, fingerprint: Fingerprint, winners: list[Pick]) -> Statement:
    """Every winner, the closest leads (the lowest interval bound) named first as the likeliest to move, and the
    kind of device the spread would be measured on; the rows in run order."""
    closest = sorted(winners, key=lambda one: one.estimate.ci_low if one.estimate else math.inf)
    figures = {
        "picks": len(winners),
        "fingerprint": fingerprint.key,
        "device_kind": manifest.environment.get("device_kind"),
        "named": _named_picks(closest),
    }
    return _statement(run_id, UNCALIBRATED, figures)


def _may_not_replicate(
    run_id: str, spread: tuple[float, str], fingerprint: Fingerprint, fragile: list[Pick]
) -> Statement:
    figures = {
        "picks": len(fragile),
        "between_process_spread": spread[0],
        "calibration_run": spread[1],
        "fingerprint": fingerprint.key,
        "named": _named_picks(fragile),
    }
    return _statement(run_id, MAY_NOT_REPLICATE, figures)


def _named_picks(picks: Sequence[Pick]) -> list[dict[str, Any]]:
    """The first ``NAMED_ROWS`` picks: case label, answer and lead."""
    return [
        {
            "case": one.case.label,
            **one.figures(),
            "ratio": one.estimate.ratio,
            "ci_low": one.estimate.ci_low,
            "ci_high": one.estimate.ci_high,
        }
        for one in picks[:NAMED_ROWS]
        if one.estimate
    ]
