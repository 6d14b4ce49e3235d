"""``mhabench history DIR --gate``: does the newest point of any gated series regress?

For each series, the newest point is judged against the level it follows: the median of the points
since the last change point before it (at most :data:`REFERENCE_POINTS` of them). The ratio newest /
reference, with the newest point's interval, goes through the one rule,
:func:`mhabench.analysis.verdict.judge_change`, widened by the series' own point-to-point spread
(:data:`SPREAD_FACTOR` robust standard deviations of the reference points): within a run the paired
ratio is tight, but between processes a machine moves more, and that movement is in the history to be read.
A regression is ``slower`` (``faster`` for a metric where higher is better).

The defaults (:data:`DEFAULT_THRESHOLD` and the spread factor) were set from a measured false-alarm rate:
docs/findings/history.md, 24 runs of one unchanged plugin on a 2-core VM.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from mhabench.analysis.step_detection import change_points, noise_of
from mhabench.analysis.verdict import Change, judge_change
from mhabench.history.series import History, Point, Series

DEFAULT_THRESHOLD = 0.10
"""Smallest regression the gate fails on (10 %); see docs/findings/history.md for the measurement behind it."""
SPREAD_FACTOR = 2.0
"""Robust standard deviations of the reference points that widen the newest point's interval (about 95 %)."""
MIN_REFERENCE_POINTS = 3
"""Fewer earlier points on the same level than this: the series is too young to gate, and passes."""
REFERENCE_POINTS = 10


@dataclasses.dataclass(frozen=True)
class GateResult:
    series: Series
    newest: Point
    reference: float
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
            return f"not gated: {self.series.name}: {len(self.series.points) - 1} earlier point(s)"
        word = "regression" if self.regression else self.change.value
        return (
            f"{word}: {self.series.name} at {self.newest.label}: {self.size:.3f}× the level before "
            f"(interval {self.low:.3f}–{self.high:.3f}, widened by ±{self.spread:.1%}; threshold {threshold:.0%})"
        )


def reference_points(points: Sequence[Point]) -> Sequence[Point]:
    """The earlier points on the newest level: after the last change point, the last ``REFERENCE_POINTS``."""
    earlier = points[:-1]
    starts = change_points([point.value for point in earlier])
    level = earlier[starts[-1] :] if starts else earlier
    return level[-REFERENCE_POINTS:]


def judge_newest(
    series: Series, threshold: float, higher_is_worse: bool = True, spread_factor: float = SPREAD_FACTOR
) -> GateResult:
    """The newest point of ``series`` against the level before it, by the one rule (``judge_change``)."""
    newest = series.points[-1]
    reference = reference_points(series.points)
    if len(reference) < MIN_REFERENCE_POINTS:
        return GateResult(series, newest, math.nan, math.nan, math.nan, math.nan, math.nan, None, False)
    level = float(np.median([point.value for point in reference]))
    spread = math.expm1(spread_factor * noise_of(np.log([point.value for point in reference])))
    low = newest.low / level if math.isfinite(newest.low) else newest.value / level
    high = newest.high / level if math.isfinite(newest.high) else newest.value / level
    change = judge_change(low, high, threshold, spread)
    worse = Change.SLOWER if higher_is_worse else Change.FASTER
    return GateResult(series, newest, level, newest.value / level, low, high, spread, change, change == worse)


def gate(history: History, threshold: float = DEFAULT_THRESHOLD) -> list[GateResult]:
    """Every series' newest point judged; the caller exits 1 if any is a regression."""
    return [judge_newest(series, threshold, history.metric.higher_is_worse) for series in history.series]
