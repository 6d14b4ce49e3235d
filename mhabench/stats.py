"""Statistics for comparing latency samples: ratio of medians with a bootstrap CI, Mann-Whitney U, Holm.

Why these: latency samples are skewed and sometimes bimodal (a noisy neighbour, a frequency
change), so the medians and a rank test are used rather than means and a t-test. A change counts
only when it is both larger than a threshold and significant after correcting for the number of
rows compared (the rule asv uses), so a 200-row comparison does not cry wolf ten times by chance.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats

from mhabench.errors import InputError

CONFIDENCE_LEVEL = 0.95
ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
"""Fixed so the same two runs always give the same intervals (a report should not change on re-render)."""


@dataclasses.dataclass(frozen=True)
class RatioEstimate:
    """``median(numerator) / median(denominator)`` and its 95% bootstrap interval (NaN when not computable)."""

    ratio: float
    ci_low: float
    ci_high: float


def _median_ratio(numerator: np.ndarray, denominator: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(numerator, axis=axis) / np.median(denominator, axis=axis)


def ratio_of_medians(numerator: Sequence[float], denominator: Sequence[float]) -> RatioEstimate:
    """Ratio of medians with a percentile bootstrap CI over two independent samples.

    The percentile method is used rather than BCa: BCa needs a jackknife that degenerates when a
    sample is constant (identical timings are common for tiny kernels) and then returns NaN.
    With fewer than 2 samples on either side there is nothing to resample: the point estimate is
    returned with a NaN interval.
    """
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)
    if num.size == 0 or den.size == 0:
        return RatioEstimate(math.nan, math.nan, math.nan)
    ratio = float(_median_ratio(num, den))
    if num.size < 2 or den.size < 2:
        return RatioEstimate(ratio, math.nan, math.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate (constant) samples warn; the interval is then [ratio, ratio]
        result = stats.bootstrap(
            (num, den), _median_ratio, n_resamples=BOOTSTRAP_RESAMPLES, vectorized=True, paired=False,
            confidence_level=CONFIDENCE_LEVEL, method="percentile", rng=np.random.default_rng(BOOTSTRAP_SEED),
        )  # fmt: skip
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return RatioEstimate(ratio, low if math.isfinite(low) else ratio, high if math.isfinite(high) else ratio)


def mann_whitney_p(base: Sequence[float], candidate: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value; NaN when either side has fewer than 2 samples (no test possible)."""
    if len(base) < 2 or len(candidate) < 2:
        return math.nan
    if np.ptp(np.concatenate([base, candidate])) == 0:
        return 1.0  # every sample identical: no evidence of any difference (scipy would return NaN)
    return float(stats.mannwhitneyu(base, candidate, alternative="two-sided").pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in input order; NaN stays NaN and does not count as a test.

    Step-down: the i-th smallest of m p-values is multiplied by (m - i), then made monotone so an
    adjusted p-value is never smaller than the one before it. Controls the family-wise error rate
    without assuming the tests are independent (rows of one run share a machine, so they are not).
    """
    indexed = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    adjusted = [math.nan] * len(p_values)
    running_max = 0.0
    for rank, (p, index) in enumerate(indexed):
        running_max = max(running_max, min(1.0, (len(indexed) - rank) * p))
        adjusted[index] = running_max
    return adjusted


def parse_threshold(text: str | float) -> float:
    """``"5%"`` or ``0.05`` → 0.05; the relative change below which a difference is called ``same``."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise InputError(f"--threshold: {text!r} is not a number or a percentage like 5%") from None
    if not (0 <= value < 10) or math.isnan(value):
        raise InputError(f"--threshold: {text!r} must be between 0% and 1000%")
    return value


VERDICTS = ("faster", "slower", "same", "~")


def verdict(ratio: float, p_adjusted: float, threshold: float, alpha: float = ALPHA) -> str:
    """``faster`` / ``slower`` when the candidate/base ratio is past the threshold AND significant.

    Past the threshold but not significant is ``~`` (maybe a change, the data cannot tell).
    Symmetric in log space: slower means ratio > 1 + t, faster means ratio < 1 / (1 + t).
    """
    if math.isnan(ratio):
        return "~"
    past = ratio > 1 + threshold or ratio < 1 / (1 + threshold)
    if not past:
        return "same"
    if math.isnan(p_adjusted) or p_adjusted >= alpha:
        return "~"
    return "slower" if ratio > 1 else "faster"
