"""The pick of a case: the fastest implementation that passed its check, if the data can tell.

The rows of one case were timed in the same interleaved rounds, so the fastest row's lead over each
other row is a paired ratio with a 95 % interval (``mhabench.analysis.speedup.speedup_estimate``).
A row is clearly slower than the fastest only when that interval lies above 1 and the lead is at
least ``TIE_MARGIN``; a winner needs every other row clearly slower, and every row that is not is
tied with the fastest. A row whose lead has no interval (fewer than ``stats.MIN_INTERVAL_SAMPLES``
rounds, or no raw samples stored) cannot be shown slower: unless each of its rounds is clearly slower
than each of the fastest row's (and that row has enough rounds for an interval), the answer is
"cannot tell", never a winner by noise. A ``--repeat N`` run answers once per repeat; repeats that
disagree are "cannot tell" too.

Nor is a lead whose rounds disagree a tie: where the median per-round ratio is a clear lead but some
rounds went the other way, so that the interval reaches 1 (the H100's n=1024 causal case: `fused` 2.5×
faster in 6 of 8 rounds, slower in 2), the answer is "cannot tell" with the split spelled out
(:func:`round_split`): the case is unstable and needs timing again, not a tie.

A pick's statement also names which of its implementations compute a different function (:func:`ablations`,
below) or in a lower precision (their registered ``compute_dtype``, in the record).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from mhabench.analysis.advice.cases import MeasuredCase, Row
from mhabench.analysis.advice.thresholds import TIE_MARGIN
from mhabench.analysis.estimate import (
    PAIRED,
    Estimate,
    is_ok,
    raw_samples,
    row_ratio,
    samples_of,
)
from mhabench.analysis.stats import MIN_INTERVAL_SAMPLES, RatioEstimate
from mhabench.impls import get_spec
from mhabench.impls.registry import available_implementations
from mhabench.results.columns import IMPL


class PickVerdict(str, enum.Enum):
    """What a case's pick says, or how a row stands against the fastest (``SLOWER``). str-valued: the words in
    ``advise --format json`` and the report are the values."""

    WINNER = "winner"
    TIED = "tied"
    ONLY = "only"
    CANNOT_TELL = "cannot tell"
    NOTHING = "nothing ran"
    SLOWER = "clearly slower"

    __str__ = str.__str__


WINNER, TIED, ONLY, CANNOT_TELL, NOTHING, SLOWER = PickVerdict

NO_RAW_SAMPLES, TOO_FEW_ROUNDS, ROUNDS_DISAGREE, REPEATS_DISAGREE = (
    "no_raw_samples",
    "too_few_rounds",
    "rounds_disagree",
    "repeats_disagree",
)
"""The reasons a pick is "cannot tell" (``Pick.reason_code``)."""
TOO_FEW_PROCESSES = "too_few_processes"
"""A replicated run's "cannot tell": a row ran ok in fewer than ``MIN_REPLICATES`` of the pick's processes."""
DOMINANCE = "dominance"
"""A winner whose lead has no interval (fewer than ``MIN_INTERVAL_SAMPLES`` rounds on the slower side): the one
exception to "no interval is cannot tell", when every round of each slower row is ``TIE_MARGIN`` slower than the
winner's slowest round and the winner has enough rounds for an interval."""


@dataclasses.dataclass(frozen=True)
class Pick:
    """The answer for one case. ``impls``: the winner, the tied set (fastest first), the only row that
    ran, or (cannot tell) the row with the lowest median; ``estimate``: impls[0]'s lead over ``runner_up``,
    ``unpaired`` why that lead is a ratio of medians ("" when paired)."""

    case: MeasuredCase
    verdict: str
    impls: tuple[str, ...]
    runner_up: str | None = None
    estimate: RatioEstimate | None = None
    reason_code: str = ""
    """Why "cannot tell", or ``dominance`` for a winner with no interval: a code of docs/advise.md's list."""
    reason_figures: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def answer(self) -> tuple[str, tuple[str, ...]]:
        """What two picks must share to be the same answer (a crossover is where it changes)."""
        return self.verdict, tuple(sorted(self.impls)) if self.verdict in (WINNER, TIED, ONLY) else ()

    def figures(self) -> dict[str, Any]:
        """The answer as a view names it: the verdict and its implementations."""
        return {"verdict": str(self.verdict), "impls": list(self.impls)}


def pick(case: MeasuredCase) -> Pick:
    """The case's answer: one per repeat, the same answer when they agree, else "cannot tell"."""
    picks = [_pick_rows(case, rows) for rows in case.repeats]
    if len({one.answer for one in picks}) == 1:
        return picks[0]
    return dataclasses.replace(
        picks[0],
        verdict=CANNOT_TELL,
        reason_code=REPEATS_DISAGREE,
        reason_figures={"repeats": [one.figures() for one in picks]},
    )


def median_ms(row: Row) -> float:
    """The median of the row's samples (its ``latency_ms`` where none are stored); +inf where it is NaN,
    so that a row with a NaN never sorts as the fastest (a float NaN compares false with everything)."""
    times = samples_of(row)
    value = float(np.median(times)) if times else math.nan
    return value if math.isfinite(value) else math.inf


def fastest_first(rows: Iterable[Row]) -> list[Row]:
    """Rows by their median, fastest first, NaN last: the order every rule reads "the fastest" from."""
    return sorted(rows, key=median_ms)


def _pick_rows(case: MeasuredCase, rows: Sequence[Row]) -> Pick:
    ok = fastest_first(row for row in rows if is_ok(row))
    if not ok:
        return Pick(case, NOTHING, ())
    if len(ok) == 1:
        return Pick(case, ONLY, (str(ok[0][IMPL]),))
    fastest, others = ok[0], ok[1:]
    leads = [row_ratio(row, fastest) for row in others]
    common = {"runner_up": str(others[0][IMPL]), "estimate": leads[0].interval}
    found = [(row, standing(one.interval, fastest, row)) for row, one in zip(others, leads, strict=True)]
    unknown = next((row for row, state in found if state == CANNOT_TELL), None)
    if unknown is not None:
        code, figures = _no_interval_code(fastest, unknown)
        return Pick(case, CANNOT_TELL, (str(fastest[IMPL]),), reason_code=code, reason_figures=figures, **common)
    split = next(
        (
            found_split
            for (row, state), one in zip(found, leads, strict=True)
            if state == TIED and (found_split := round_split(fastest, row, one)) is not None
        ),
        None,
    )
    if split is not None:
        return Pick(
            case, CANNOT_TELL, (str(fastest[IMPL]),), reason_code=ROUNDS_DISAGREE, reason_figures=split, **common
        )
    tied = (str(fastest[IMPL]), *(str(row[IMPL]) for row, state in found if state == TIED))
    dominated = [(row, one) for (row, state), one in zip(found, leads, strict=True) if not one.has_interval]
    if len(tied) == 1 and dominated:
        return Pick(case, WINNER, tied, reason_code=DOMINANCE, reason_figures=_dominance(fastest, dominated), **common)
    return Pick(case, TIED if len(tied) > 1 else WINNER, tied, **common)


def _dominance(fastest: Row, dominated: Sequence[tuple[Row, Estimate]]) -> dict[str, Any]:
    """What a winner without an interval rests on: every round of each slower row against the winner's slowest."""
    return {
        "winner_rounds": len(samples_of(fastest)),
        "winner_slowest_ms": max(samples_of(fastest)),
        "slower": {
            str(row[IMPL]): {"rounds": len(samples_of(row)), "fastest_ms": min(samples_of(row))} for row, _ in dominated
        },
        "margin": TIE_MARGIN,
        "min_interval_samples": MIN_INTERVAL_SAMPLES,
    }


def _no_interval_code(fastest: Row, other: Row) -> tuple[str, dict[str, Any]]:
    """Why a lead has no interval: no raw samples stored, or the side with fewer rounds and how many it needs."""
    if not (raw_samples(fastest) and raw_samples(other)):
        return NO_RAW_SAMPLES, {}
    fewer = min((fastest, other), key=lambda row: len(samples_of(row)))
    return TOO_FEW_ROUNDS, {
        "impl": str(fewer[IMPL]),
        "rounds": len(samples_of(fewer)),
        "needs": MIN_INTERVAL_SAMPLES,
    }


def round_split(fastest: Row, other: Row, one: Estimate) -> dict[str, Any] | None:
    """How the rounds split where a paired lead is clear by its median (at least ``TIE_MARGIN``) but its
    interval reaches 1 because some rounds went the other way; None for any other lead (a noisy tie has a
    median near 1, a lead with no round behind is merely wide)."""
    if one.method != PAIRED or one.ratio < 1 + TIE_MARGIN or clearly_slower(one.interval):
        return None
    ratios = [o / f for f, o in zip(samples_of(fastest), samples_of(other), strict=False) if f > 0]
    ahead = [ratio for ratio in ratios if ratio >= 1 + TIE_MARGIN]
    behind = [ratio for ratio in ratios if ratio < 1]
    if not ahead or not behind:
        return None
    return {
        "fastest": str(fastest[IMPL]),
        "other": str(other[IMPL]),
        "ahead": len(ahead),
        "behind": len(behind),
        "rounds": len(ratios),
        "ahead_ratio": float(np.median(ahead)),
    }


def clearly_slower(lead: RatioEstimate) -> bool:
    """The interval lies above 1 and the lead is at least ``TIE_MARGIN``: not a tie."""
    return math.isfinite(lead.ci_low) and lead.ci_low > 1 and lead.ratio >= 1 + TIE_MARGIN


def standing(lead: RatioEstimate, fastest: Row, other: Row) -> str:
    """``SLOWER``, ``TIED`` or ``CANNOT_TELL``: ``other`` against the fastest row. With an interval, the tie
    rule; without one, ``other`` is clearly slower only when its fastest round is ``TIE_MARGIN`` slower than
    the fastest row's slowest and that row has enough rounds for an interval, so that a few lucky rounds
    cannot hide behind a lead nobody could check."""
    if math.isfinite(lead.ci_low):
        return SLOWER if clearly_slower(lead) else TIED
    fastest_ms, other_ms = samples_of(fastest), samples_of(other)
    measured = len(fastest_ms) >= MIN_INTERVAL_SAMPLES and bool(other_ms)
    return SLOWER if measured and min(other_ms) >= max(fastest_ms) * (1 + TIE_MARGIN) else CANNOT_TELL


# --- ablations --------------------------------------------------------------------------------------------------------


def ablations(impls: Iterable[str]) -> list[str]:
    """The names among ``impls`` registered with a reference of their own: each computes another function (it
    changes the model), so being faster is no reason to switch to it."""
    known = set(available_implementations())
    return [impl for impl in impls if impl in known and get_spec(impl).reference is not None]
