"""``mhabench history DIR --gate``: does the newest point of any gated series regress?

For each series the newest point is judged against the level it follows: the earlier points since the
last change point (at most :data:`REFERENCE_POINTS`). Both sides are pooled as change points are
(:func:`mhabench.history.series.level_change`), and their ratio goes through the one rule,
:func:`mhabench.analysis.verdict.judge_change`, widened by the series' own point-to-point spread
(:data:`SPREAD_FACTOR` robust standard deviations of the reference points): within a run the paired ratio
is tight, but between processes a machine moves more, and that movement is in the history to be read.
A regression is a change past the threshold in the worse direction (``faster`` is worse for TFLOP/s).

Where the newest points form a young level (a change point among the last few), that whole level is
judged against the one before it, so a regression that was not yet clear at its own commit still fails the
next ones, until the new level has :data:`MIN_REFERENCE_POINTS` points and becomes the reference itself.

The threshold default was set from a measured false-alarm rate: docs/findings/history.md (24 runs of one
unchanged plugin on a shared 2-core VM).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from mhabench.analysis.step_detection import change_points, noise_of
from mhabench.analysis.verdict import Change, judge_change
from mhabench.history.series import History, Point, Series, level_change

DEFAULT_THRESHOLD = 0.05
"""Smallest regression the gate fails on (5 %, compare's default too); docs/findings/history.md#false-alarms."""
SPREAD_FACTOR = 2.0
"""Robust standard deviations of the reference points that widen the interval (about a 95 % band)."""
MIN_REFERENCE_POINTS = 3
"""Fewer earlier points on the reference level than this: the series is too young to gate, and passes."""
REFERENCE_POINTS = 10


@dataclasses.dataclass(frozen=True)
class GateResult:
    series: Series
    newest: Point
    since: Point
    """The first point judged: the newest point itself, or where a young level began."""
    reference_points: int
    size: float
    low: float
    high: float
    spread: float
    change: Change | None
    """None: too few earlier points to judge."""
    regression: bool

    def message(self, threshold: float) -> str:
        """One line naming the series, the commit and the size."""
        if self.change is None:
            return f"not gated: {self.series.name}: {self.reference_points} earlier point(s) on its level"
        word = "regression" if self.regression else self.change.value
        where = self.newest.label
        if self.since is not self.newest:
            where = f"{self.since.label} (the level since then, up to {self.newest.label})"
        return (
            f"{word}: {self.series.name} at {where}: {self.size:.3f}× the level before "
            f"(interval {self.low:.3f}–{self.high:.3f}, widened by ±{self.spread:.1%}; threshold {threshold:.0%})"
        )


def levels(points: Sequence[Point]) -> tuple[Sequence[Point], Sequence[Point]]:
    """(reference, judged): the points the newest is judged against, and the points judged.

    On a level of ``MIN_REFERENCE_POINTS`` or more points: the newest point alone against the earlier points
    of its level. On a younger level: that whole level against the level before it.
    """
    starts = change_points([point.value for point in points])
    start = starts[-1] if starts else 0
    if starts and len(points) - start < MIN_REFERENCE_POINTS:
        before = starts[-2] if len(starts) > 1 else 0
        return points[before:start][-REFERENCE_POINTS:], points[start:]
    return points[start:-1][-REFERENCE_POINTS:], points[-1:]


def judge_newest(
    series: Series, threshold: float, higher_is_worse: bool = True, spread_factor: float = SPREAD_FACTOR
) -> GateResult:
    """The newest point (or young level) of ``series`` against the level before it, by the one rule."""
    reference, judged = levels(series.points)
    newest = series.points[-1]
    if len(reference) < MIN_REFERENCE_POINTS:
        nan = math.nan
        return GateResult(series, newest, judged[0], len(reference), nan, nan, nan, nan, None, False)
    step = level_change(reference, judged, threshold, {})
    spread = math.expm1(spread_factor * noise_of(np.log([point.value for point in reference])))
    change = judge_change(step.low, step.high, threshold, spread)
    regression = change == (Change.SLOWER if higher_is_worse else Change.FASTER)
    return GateResult(
        series, newest, judged[0], len(reference), step.size, step.low, step.high, spread, change, regression
    )


def gate(history: History, threshold: float = DEFAULT_THRESHOLD) -> list[GateResult]:
    """Every series' newest point judged; the caller exits 1 if any is a regression."""
    return [judge_newest(series, threshold, history.metric.higher_is_worse) for series in history.series]
