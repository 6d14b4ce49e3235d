"""Statistics for comparing latency samples: paired and unpaired ratios with bootstrap CIs, Mann-Whitney U, Holm."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from mhabench.errors import InputError

CONFIDENCE_LEVEL = 0.95
ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
"""Fixed so the same two runs always give the same intervals (a report should not change on re-render)."""
MIN_INTERVAL_SAMPLES = 6
"""Fewest samples (rounds, when paired) with a 95 % interval."""


@dataclasses.dataclass(frozen=True)
class RatioEstimate:
    """``median(numerator) / median(denominator)`` and its 95% bootstrap interval (NaN when not computable)."""

    ratio: float
    ci_low: float
    ci_high: float


def ratio_of_medians(numerator: Sequence[float], denominator: Sequence[float]) -> RatioEstimate:
    """Ratio of medians with a percentile bootstrap CI over two independent samples."""
    num = np.sort(np.asarray(numerator, dtype=float))
    den = np.sort(np.asarray(denominator, dtype=float))
    if num.size == 0 or den.size == 0:
        return RatioEstimate(math.nan, math.nan, math.nan)
    ratio = float(np.median(num) / np.median(den))
    if min(num.size, den.size) < MIN_INTERVAL_SAMPLES:
        return RatioEstimate(ratio, math.nan, math.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = _resampled_medians(num, 0) / _resampled_medians(den, 1)
    tail_percent = (1 - CONFIDENCE_LEVEL) / 2 * 100
    low, high = (float(bound) for bound in np.percentile(ratios, [tail_percent, 100 - tail_percent]))
    return RatioEstimate(ratio, low if math.isfinite(low) else ratio, high if math.isfinite(high) else ratio)


def _resampled_medians(ordered: np.ndarray, stream: int) -> np.ndarray:
    """The medians of ``BOOTSTRAP_RESAMPLES`` resamples of the sorted sample ``ordered``."""
    low_rank, high_rank = bootstrap_median_ranks(ordered.size, stream)
    return (ordered[low_rank] + ordered[high_rank]) / 2


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> RatioEstimate:
    """Median of the per-round ratios ``numerator[i] / denominator[i]`` with a 95% bootstrap CI over rounds."""
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    if num.shape != den.shape:
        raise ValueError(f"paired samples need equal lengths, got {num.size} and {den.size}")
    ratios = np.sort(num / den)
    if ratios.size == 0:
        return RatioEstimate(math.nan, math.nan, math.nan)
    estimate = float(ratios[(ratios.size - 1) // 2] + ratios[ratios.size // 2]) / 2  # sorted: the median
    if ratios.size < MIN_INTERVAL_SAMPLES:
        return RatioEstimate(estimate, math.nan, math.nan)
    low_rank, high_rank = bootstrap_median_ranks(ratios.size, 0)
    medians = (ratios[low_rank] + ratios[high_rank]) / 2
    tail_percent = (1 - CONFIDENCE_LEVEL) / 2 * 100
    low, high = np.percentile(medians, [tail_percent, 100 - tail_percent])
    return RatioEstimate(estimate, float(low), float(high))


@functools.lru_cache(maxsize=512)
def bootstrap_median_ranks(n: int, stream: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``BOOTSTRAP_RESAMPLES`` resamples of ``n`` values: 0-based ranks of its lower and upper median."""
    rng = np.random.default_rng([BOOTSTRAP_SEED, stream] if stream else BOOTSTRAP_SEED)
    k = (n - 1) // 2 + 1  # 1-based rank of the lower median
    lower = rng.beta(k, n - k + 1, BOOTSTRAP_RESAMPLES)
    upper = lower if n % 2 else lower + (1 - lower) * rng.beta(1, n - k, BOOTSTRAP_RESAMPLES)
    return _rank(lower, n), _rank(upper, n)


def _rank(uniform: np.ndarray, n: int) -> np.ndarray:
    """``floor(n·U)`` as an index; a Beta draw can round to exactly 1.0, which must still be a valid rank."""
    ranks = np.minimum((uniform * n).astype(np.int64), n - 1)
    ranks.setflags(write=False)
    return ranks


def mann_whitney_p(base: Sequence[float], candidate: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value; NaN when either side has fewer than 2 samples (no test possible)."""
    if len(base) < 2 or len(candidate) < 2:
        return math.nan
    if np.ptp(np.concatenate([base, candidate])) == 0:
        return 1.0  # every sample identical: no evidence of any difference (scipy would return NaN)
    return float(stats.mannwhitneyu(base, candidate, alternative="two-sided").pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in input order; NaN stays NaN and does not count as a test."""
    indexed = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    adjusted = [math.nan] * len(p_values)
    running_max = 0.0
    for rank, (p, index) in enumerate(indexed):
        running_max = max(running_max, min(1.0, (len(indexed) - rank) * p))
        adjusted[index] = running_max
    return adjusted


def parse_threshold(text: str | float, option: str = "--threshold") -> float:
    """``"5%"`` or ``0.05`` → 0.05; the relative change below which a difference is called ``same``."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise InputError(f"{option}: {text!r} is not a number or a percentage like 5%") from None
    if not (0 <= value < 10) or math.isnan(value):
        raise InputError(f"{option}: {text!r} must be between 0% and 1000%")
    return value
