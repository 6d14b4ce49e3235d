"""The caveat on a one-process run's winners, from this machine's measured between-process spread.

A run of one process still answers; but its intervals are within-process intervals, and the next
process may see a lead move by the machine's between-process spread (``mhabench calibrate``, stored
per machine fingerprint). A winner whose lead over the runner-up, widened by that spread
(``mhabench.analysis.verdict.judge_change`` with no threshold), no longer lies wholly above 1 "may not
replicate". Without a calibration for the run's fingerprint the caveat says that the spread is unknown
and how to measure it. A replicated run (``replicates: N``) needs neither: its picks are read across
its processes already (``mhabench.analysis.advice.replicated``).

- ``may_not_replicate``: winners whose lead is within the calibrated spread;
- ``uncalibrated``: winners of a one-process run on a machine with no calibration.
"""

from __future__ import annotations

import math

from mhabench.analysis.advice import wording
from mhabench.analysis.advice.answers import RunAnswers
from mhabench.analysis.advice.pick import WINNER, Pick
from mhabench.analysis.advice.replicated import is_replicated
from mhabench.analysis.advice.statement import CAVEAT, Statement
from mhabench.analysis.verdict import Change, judge_change
from mhabench.results.calibration import Calibration, load_calibration
from mhabench.results.fingerprint import Fingerprint

MAY_NOT_REPLICATE, UNCALIBRATED = "may_not_replicate", "uncalibrated"
NAMED = 4
"""How many picks the sentence names; its rows hold every one."""


def calibrated_caveats(answers: RunAnswers) -> list[Statement]:
    """``may_not_replicate`` or ``uncalibrated`` for a run of one process with winners; nothing otherwise."""
    if is_replicated(answers.run.manifest):
        return []
    winners = [
        one
        for case in answers.cases
        if len(case.repeats) == 1
        and (one := answers.picks[case.case_id]).verdict == WINNER
        and one.estimate is not None
        and math.isfinite(one.estimate.ci_low)
    ]
    if not winners:
        return []
    fingerprint = Fingerprint.of(answers.environment)
    calibration = load_calibration(fingerprint)
    if calibration is None or not math.isfinite(calibration.between_process_spread):
        sentence = (
            f"{len(winners)} pick(s) rest on one process, and this machine ({fingerprint.key}) has no measured "
            "between-process spread: `mhabench calibrate` measures it, or run with --replicates 3 to read the "
            "picks across processes."
        )
        return [_statement(answers, UNCALIBRATED, sentence, {"picks": len(winners)}, winners)]
    fragile = [one for one in winners if not replicates(one, calibration.between_process_spread)]
    if not fragile:
        return []
    return [
        _statement(answers, MAY_NOT_REPLICATE, _sentence(fragile, calibration), _figures(fragile, calibration), fragile)
    ]


def replicates(one: Pick, spread: float) -> bool:
    """Whether the winner's lead stays above 1 with its interval widened by ``spread``."""
    assert one.estimate is not None
    return judge_change(one.estimate.ci_low, one.estimate.ci_high, 0.0, spread) is Change.SLOWER


def _sentence(fragile: list[Pick], calibration: Calibration) -> str:
    named = "; ".join(
        f"{one.case.label} ({one.phrase()}, {wording.ratio(one.estimate)})" for one in fragile[:NAMED] if one.estimate
    )
    more = f" and {len(fragile) - NAMED} more" if len(fragile) > NAMED else ""
    return (
        f"{len(fragile)} pick(s) may not replicate: the lead is within this machine's between-process spread "
        f"({wording.percent(calibration.between_process_spread)}, `mhabench calibrate` run {calibration.run_id}): "
        f"{named}{more}. Run with --replicates 3 to read them across processes."
    )


def _figures(fragile: list[Pick], calibration: Calibration) -> dict[str, object]:
    return {
        "picks": len(fragile),
        "between_process_spread": calibration.between_process_spread,
        "calibration_run": calibration.run_id,
        "fingerprint": calibration.fingerprint_key,
    }


def _statement(
    answers: RunAnswers, rule: str, sentence: str, figures: dict[str, object], picks: list[Pick]
) -> Statement:
    refs = tuple(one.case.ref(impl) for one in picks for impl in (*one.impls, one.runner_up) if impl)
    return Statement(CAVEAT, rule, "", answers.run.run_id, sentence, figures, refs)
