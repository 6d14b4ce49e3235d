"""Across several runs of one config: how many cases flip, the figure a replication target is stated in.

A case flips when a winner in one run is clearly slower in another: another run picked a different
winner, or a tie the first run's winner is not part of. Two runs that say "winner" and "tied with it"
do not flip (the second run could not separate what the first did, and contradicts nothing); a run
that "cannot tell" contradicts nothing either. The flip rate is the share of the cases every run
measured that flip; docs/findings/replication.md states its target in it. Runs are matched on
``case_id``, so this reads runs of one config (the question "does the answer replicate?").
"""

from __future__ import annotations

from collections.abc import Sequence

from mhabench.analysis.advice import wording
from mhabench.analysis.advice.answers import RunAnswers
from mhabench.analysis.advice.pick import TIED, WINNER, Pick
from mhabench.analysis.advice.statement import ACROSS, Statement

FLIPS = "flips"
NAMED = 4
"""How many flipped cases the sentence names."""


def flips(runs: Sequence[RunAnswers]) -> list[Statement]:
    """One statement for two runs or more: the cases every run measured, how many flip, which."""
    if len(runs) < 2:
        return []
    common = [case_id for case_id in runs[0].picks if all(case_id in run.picks for run in runs[1:])]
    flipped = [case_id for case_id in common if flipped_case([run.picks[case_id] for run in runs])]
    rate = len(flipped) / len(common) if common else 0.0
    named = "; ".join(_said(runs, case_id) for case_id in flipped[:NAMED])
    more = f" and {len(flipped) - NAMED} more" if len(flipped) > NAMED else ""
    sentence = (
        f"{len(flipped)} of the {len(common)} cases all {len(runs)} runs measured flip (a winner in one run is "
        f"clearly slower in another): flip rate {wording.percent(rate)}" + (f": {named}{more}." if flipped else ".")
    )
    figures = {"runs": len(runs), "cases": len(common), "flipped": len(flipped), "flip_rate": rate}
    scope = " / ".join(run.run.run_id for run in runs)
    return [Statement(ACROSS, FLIPS, "", scope, sentence, figures, ())]


def flipped_case(picks: Sequence[Pick]) -> bool:
    """Whether some run's winner is left out of another run's winner or tied set."""
    winners = {one.impls[0] for one in picks if one.verdict == WINNER}
    answered = [set(one.impls) for one in picks if one.verdict in (WINNER, TIED)]
    return any(winner not in chosen for winner in winners for chosen in answered)


def _said(runs: Sequence[RunAnswers], case_id: str) -> str:
    picks = [run.picks[case_id] for run in runs]
    return f"{picks[0].case.label} ({', '.join(one.phrase() for one in picks)})"
