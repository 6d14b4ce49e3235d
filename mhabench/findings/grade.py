"""Grading a claim against what one run measured, and the level of evidence several gradings support.

A grade is one of four words. ``holds``: the run shows what the claim says. ``holds, wider``: a
``ratio`` whose estimate lies in the stated range while its interval reaches outside it. ``does not
hold``: the run shows something else (another implementation wins, a stated tie is resolved, a ratio
or a process falls outside the stated range). ``cannot tell``: the run leans the claim's way but does
not resolve it (the claimed winner is fastest yet tied, no interval), or lacks the case.

The level a page may state a claim at (:func:`evidence`) is ``held`` only when it held in at least two
sittings started at least an hour apart and failed in none; ``seen once`` when it held but not so;
``did not hold`` when any sitting contradicted it. The between-process interval of one sitting does
not cover a sitting an hour later on a shared machine; two sittings are the least that shows that
spread.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
from collections.abc import Sequence

from mhabench.findings.claims import Claim, Kind
from mhabench.findings.reading import TIED, WINNER, CaseReading, Speedup


class Grade(str, enum.Enum):
    HOLDS = "holds"
    HOLDS_WIDER = "holds, wider"
    DOES_NOT_HOLD = "does not hold"
    CANNOT_TELL = "cannot tell"

    __str__ = str.__str__


class Level(str, enum.Enum):
    HELD = "held"
    SEEN_ONCE = "seen once"
    DID_NOT_HOLD = "did not hold"

    __str__ = str.__str__


HOLDING = frozenset({Grade.HOLDS, Grade.HOLDS_WIDER})
SITTING_GAP = dt.timedelta(hours=1)
"""Least time between the starts of two sittings whose agreement publishes a claim."""


@dataclasses.dataclass(frozen=True)
class Measured:
    """A grade with the figure behind it: ``pair[0]``'s speedup over ``pair[1]``, ``ratio`` [``ci_low``–``ci_high``]
    (NaN where there is none), its per-process ratios, and what the run picked."""

    grade: Grade
    pair: tuple[str, str] = ("", "")
    ratio: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    per_process: tuple[float, ...] = ()
    picked: str = ""


def grade(claim: Claim, reading: CaseReading | None) -> Measured:
    """The claim against one run's reading of its case (None: the run has no such case)."""
    if reading is None:
        return Measured(Grade.CANNOT_TELL, picked="case not in the run")
    missing = [impl for impl in claim.impls if impl not in reading.impls]
    picked = _picked(reading)
    if missing:
        return Measured(Grade.CANNOT_TELL, picked=f"{', '.join(missing)} did not run ok; {picked}")
    return _GRADERS[claim.kind](claim, reading, picked)


def _picked(reading: CaseReading) -> str:
    if reading.verdict == WINNER:
        return f"{reading.picked[0]} wins"
    if reading.verdict == TIED:
        return f"{' = '.join(reading.picked)} tied"
    return reading.verdict


def _with(speedup: Speedup | None, found: Grade, picked: str) -> Measured:
    if speedup is None:
        return Measured(Grade.CANNOT_TELL, picked=picked)
    pair = (speedup.faster, speedup.slower)
    return Measured(found, pair, speedup.ratio, speedup.ci_low, speedup.ci_high, speedup.per_process, picked)


def _fastest(reading: CaseReading) -> str:
    """The run's fastest implementation: the pick's first (winner, fastest of the tied, or lowest median)."""
    return reading.picked[0] if reading.picked else ""


def _winner(claim: Claim, reading: CaseReading, picked: str) -> Measured:
    claimed = claim.impls[0]
    fastest = _fastest(reading)
    if fastest != claimed:
        return _with(reading.speedup(fastest, claimed), _unless_tied(reading, fastest, claimed), picked)
    # the lead over the nearest rival: what a win rests on, and the rival a tie is with
    closest = min(
        (reading.speedup(claimed, impl) for impl in reading.impls if impl != claimed),
        key=lambda one: one.ratio if one else math.inf,
        default=None,
    )
    return _with(closest, Grade.HOLDS if reading.verdict == WINNER else Grade.CANNOT_TELL, picked)


def _unless_tied(reading: CaseReading, faster: str, slower: str) -> Grade:
    """Another implementation is fastest: the claim fails when it is clearly faster, else cannot tell."""
    speedup = reading.speedup(faster, slower)
    return Grade.DOES_NOT_HOLD if speedup is not None and speedup.clearly else Grade.CANNOT_TELL


def _tie(claim: Claim, reading: CaseReading, picked: str) -> Measured:
    pairs = [(a, b) for a in claim.impls for b in claim.impls if a != b]
    speedups = {pair: reading.speedup(*pair) for pair in pairs}
    if any(one is None or not math.isfinite(one.ci_low) for one in speedups.values()):
        return _with(None, Grade.CANNOT_TELL, picked)
    widest = max(speedups.values(), key=lambda one: one.ratio if one else 0.0)
    resolved = any(one is not None and one.clearly for one in speedups.values())
    return _with(widest, Grade.DOES_NOT_HOLD if resolved else Grade.HOLDS, picked)


def _ratio(claim: Claim, reading: CaseReading, picked: str) -> Measured:
    assert claim.figure is not None and claim.figure[1] is not None
    low, high = claim.figure
    speedup = reading.speedup(claim.impls[0], claim.impls[1])
    if speedup is None or not math.isfinite(speedup.ci_low):
        return _with(speedup, Grade.CANNOT_TELL, picked)
    if not low <= speedup.ratio <= high:
        return _with(speedup, Grade.DOES_NOT_HOLD, picked)
    inside = low <= speedup.ci_low and speedup.ci_high <= high
    return _with(speedup, Grade.HOLDS if inside else Grade.HOLDS_WIDER, picked)


def _ordering(claim: Claim, reading: CaseReading, picked: str) -> Measured:
    steps = [reading.speedup(a, b) for a, b in zip(claim.impls, claim.impls[1:], strict=False)]
    reversed_steps = [reading.speedup(b, a) for a, b in zip(claim.impls, claim.impls[1:], strict=False)]
    # the lead over the nearest rival: what a win rests on, and the rival a tie is with
    closest = min(steps, key=lambda one: one.ratio if one else math.inf)
    if any(one is not None and one.clearly for one in reversed_steps):
        return _with(closest, Grade.DOES_NOT_HOLD, picked)
    if all(one is not None and one.clearly for one in steps):
        return _with(closest, Grade.HOLDS, picked)
    return _with(closest, Grade.CANNOT_TELL, picked)


def _slowest(claim: Claim, reading: CaseReading, picked: str) -> Measured:
    slowest = claim.impls[0]
    others = [impl for impl in reading.impls if impl != slowest]
    leads = [reading.speedup(impl, slowest) for impl in others]
    if not leads:
        return _with(None, Grade.CANNOT_TELL, picked)
    # the lead over the nearest rival: what a win rests on, and the rival a tie is with
    closest = min(leads, key=lambda one: one.ratio if one else math.inf)
    if any((beaten := reading.speedup(slowest, impl)) is not None and beaten.clearly for impl in others):
        return _with(closest, Grade.DOES_NOT_HOLD, picked)
    if all(one is not None and one.clearly for one in leads):
        return _with(closest, Grade.HOLDS, picked)
    return _with(closest, Grade.CANNOT_TELL, picked)


def _every_process(claim: Claim, reading: CaseReading, picked: str) -> Measured:
    assert claim.figure is not None
    low, high = claim.figure
    speedup = reading.speedup(claim.impls[0], claim.impls[1])
    if speedup is None or len(speedup.per_process) < claim.replicates:
        return _with(speedup, Grade.CANNOT_TELL, picked)
    inside = all(low <= ratio and (high is None or ratio <= high) for ratio in speedup.per_process)
    return _with(speedup, Grade.HOLDS if inside else Grade.DOES_NOT_HOLD, picked)


_GRADERS = {
    Kind.WINNER: _winner,
    Kind.TIE: _tie,
    Kind.RATIO: _ratio,
    Kind.ORDERING: _ordering,
    Kind.SLOWEST: _slowest,
    Kind.EVERY_PROCESS: _every_process,
}


def evidence(grades: Sequence[tuple[dt.datetime, Grade]]) -> Level:
    """The level a page may state a claim at, from its grade in each sitting (started at)."""
    if any(found == Grade.DOES_NOT_HOLD for _, found in grades):
        return Level.DID_NOT_HOLD
    held = sorted(started for started, found in grades if found in HOLDING)
    if len(held) >= 2 and held[-1] - held[0] >= SITTING_GAP:
        return Level.HELD
    return Level.SEEN_ONCE
