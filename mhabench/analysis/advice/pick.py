"""The pick of a case: the fastest implementation that passed its check, if the data can tell.

The rows of one case were timed in the same interleaved rounds, so the fastest row's lead over each
other row is a paired ratio with a 95 % interval (``mhabench.analysis.speedup.speedup_estimate``).
A row is clearly slower than the fastest only when that interval lies above 1 and the lead is at
least ``TIE_MARGIN``; going down the medians, every row before the first clearly slower one is tied
with the fastest (rows after it do not change the answer). Where one of those leads has no interval
(fewer than ``stats.MIN_INTERVAL_SAMPLES`` rounds) the answer is "cannot tell", never a winner by
noise. A ``--repeat N`` run answers once per repeat; repeats that disagree are "cannot tell" too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from mhabench.analysis.advice import wording
from mhabench.analysis.advice.ablations import ablation_note, ablations
from mhabench.analysis.advice.cases import Case, Row
from mhabench.analysis.advice.cells import text
from mhabench.analysis.advice.statement import PICK, Statement
from mhabench.analysis.advice.thresholds import TIE_MARGIN
from mhabench.analysis.speedup import PAIRED, is_ok, samples_of, speedup_estimate
from mhabench.analysis.stats import MIN_INTERVAL_SAMPLES, RatioEstimate
from mhabench.results.schema import IMPL, LATENCY_MS, ROUNDS_ID, STATUS

WINNER, TIED, ONLY, CANNOT_TELL, NOTHING = "winner", "tied", "only", "cannot tell", "nothing ran"


@dataclasses.dataclass(frozen=True)
class Pick:
    """The answer for one case. ``impls``: the winner, the tied set (fastest first), the only row that
    ran, or (cannot tell) the row with the lowest median; ``estimate``: impls[0]'s lead over ``runner_up``."""

    case: Case
    verdict: str
    impls: tuple[str, ...]
    runner_up: str | None = None
    estimate: RatioEstimate | None = None
    method: str = ""
    rounds: int = 0
    reason: str = ""

    @property
    def answer(self) -> tuple[str, tuple[str, ...]]:
        """What two picks must share to be the same answer (a crossover is where it changes)."""
        return self.verdict, tuple(sorted(self.impls)) if self.verdict in (WINNER, TIED, ONLY) else ()

    def phrase(self) -> str:
        """The answer in a few words: ```fused` wins``, ```naive` and `fused` tied``, ``cannot tell``."""
        if self.verdict == WINNER:
            return f"{wording.impl(self.impls[0])} wins"
        if self.verdict == TIED:
            return f"{wording.impls(sorted(self.impls))} tied"
        if self.verdict == ONLY:
            return f"only {wording.impl(self.impls[0])} ran"
        return self.verdict


def pick(case: Case) -> Pick:
    """The case's answer: one per repeat, the same answer when they agree, else "cannot tell"."""
    picks = [_pick_rows(case, rows) for rows in case.repeats]
    if len({one.answer for one in picks}) == 1:
        return picks[0]
    said = "; ".join(f"repeat {index}: {one.phrase()}" for index, one in enumerate(picks))
    return dataclasses.replace(picks[0], verdict=CANNOT_TELL, reason=f"its {len(picks)} repeats disagree ({said})")


def _pick_rows(case: Case, rows: Sequence[Row]) -> Pick:
    ok = sorted((row for row in rows if is_ok(row)), key=lambda row: float(row[LATENCY_MS]))
    if not ok:
        return Pick(case, NOTHING, ())
    if len(ok) == 1:
        return Pick(case, ONLY, (str(ok[0][IMPL]),))
    fastest, others = ok[0], ok[1:]
    leads = {str(row[IMPL]): _lead(fastest, row) for row in others}
    rounds = min(len(samples_of(fastest)), len(samples_of(others[0])))
    runner_up = str(others[0][IMPL])
    estimate, method = leads[runner_up]
    common = {"runner_up": runner_up, "estimate": estimate, "method": method, "rounds": rounds}
    tied = [str(fastest[IMPL])]
    for impl, (lead, _) in leads.items():  # down the medians, up to the first row clearly slower
        if not math.isfinite(lead.ci_low):
            return Pick(case, CANNOT_TELL, (tied[0],), reason=_no_interval(fastest, _row(others, impl)), **common)
        if clearly_slower(lead):
            break
        tied.append(impl)
    return Pick(case, TIED if len(tied) > 1 else WINNER, tuple(tied), **common)


def _row(rows: Sequence[Row], impl: str) -> Row:
    return next(row for row in rows if row[IMPL] == impl)


def _no_interval(fastest: Row, other: Row) -> str:
    """Why a lead has no interval: the side with fewer rounds, and how many an interval needs."""
    fewer = min((fastest, other), key=lambda row: len(samples_of(row)))
    count = len(samples_of(fewer))
    rounds = f"{count} timed round{'s' if count != 1 else ''}"
    return f"{wording.impl(str(fewer[IMPL]))} has {rounds}: no interval (it needs {MIN_INTERVAL_SAMPLES})"


def _lead(fastest: Row, other: Row) -> tuple[RatioEstimate, str]:
    """``other``'s time over ``fastest``'s (≥ 1 by the medians), paired when both were timed in the same rounds."""
    same_rounds = bool(text(fastest, ROUNDS_ID)) and text(fastest, ROUNDS_ID) == text(other, ROUNDS_ID)
    return speedup_estimate(samples_of(other), samples_of(fastest), same_rounds)


def clearly_slower(lead: RatioEstimate) -> bool:
    """The interval lies above 1 and the lead is at least ``TIE_MARGIN``: not a tie."""
    return math.isfinite(lead.ci_low) and lead.ci_low > 1 and lead.ratio >= 1 + TIE_MARGIN


def statement(one: Pick) -> Statement:
    """The pick as a sentence, with its figures and every row it compared."""
    rows = tuple(one.case.ref(str(row[IMPL])) for row in one.case.rows if is_ok(row))
    figures = {
        "verdict": one.verdict,
        "impls": list(one.impls),
        "runner_up": one.runner_up,
        "speedup": one.estimate.ratio if one.estimate else None,
        "ci_low": one.estimate.ci_low if one.estimate else None,
        "ci_high": one.estimate.ci_high if one.estimate else None,
        "method": one.method,
        "rounds": one.rounds,
        "ablations": ablations(one.impls),
    }
    shown = one.impls if one.verdict in (WINNER, TIED, ONLY) else ()
    sentence = f"{one.case.label}: {_sentence(one)}{_excluded(one.case)}{ablation_note(shown)}"
    return Statement(PICK, "pick", one.case.group, one.case.label, sentence, figures, rows)


def _sentence(one: Pick) -> str:
    if one.verdict == NOTHING:
        return "nothing ran ok, so there is nothing to pick."
    if one.verdict == ONLY:
        return f"only {wording.impl(one.impls[0])} ran ok; there is nothing to compare it with."
    assert one.estimate is not None and one.runner_up is not None
    lead = f"{wording.ratio(one.estimate)} over {wording.impl(one.runner_up)} ({_method(one)})"
    if one.verdict == CANNOT_TELL:
        return f"cannot tell: {wording.impl(one.impls[0])} had the lowest median, {lead}, but {one.reason}."
    if one.verdict == WINNER:
        return f"{wording.impl(one.impls[0])} wins, {lead}."
    why = "the interval includes 1" if one.estimate.ci_low <= 1 else f"the lead is under {wording.percent(TIE_MARGIN)}"
    slower = [str(row[IMPL]) for row in one.case.rows if is_ok(row) and str(row[IMPL]) not in one.impls]
    rest = f"; {wording.impls(slower)} clearly slower" if slower else ""
    return f"no clear winner: {wording.impls(one.impls)} are tied ({wording.impl(one.impls[0])} {lead}: {why}){rest}."


def _method(one: Pick) -> str:
    if one.method == PAIRED:
        return f"paired over {one.rounds} rounds"
    return "ratio of medians: not timed in the same rounds"


def _excluded(case: Case) -> str:
    """Rows that failed their correctness check are never picked; the sentence says so."""
    failed = [str(row[IMPL]) for row in case.rows if text(row, STATUS) == "mismatch"]
    if not failed:
        return ""
    verb = "is" if len(failed) == 1 else "are"
    return f" {wording.impls(failed)} failed the correctness check and {verb} not considered."
