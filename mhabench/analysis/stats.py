"""Statistics for comparing latency samples: paired and unpaired ratios with bootstrap CIs, Mann-Whitney U, Holm.

Why these: latency samples are skewed and sometimes bimodal (a noisy neighbour, a frequency
change), so the medians and a rank test are used rather than means and a t-test. Within one run,
implementations timed in the same rounds are compared round by round (:func:`paired_ratio`), so a
slow round slows both sides and cancels; samples that are not paired (two runs, older runs) are
compared by the ratio of their medians (:func:`ratio_of_medians`). Whether a ratio is a change is
``mhabench.analysis.verdict``'s rule (its interval against the threshold); the Holm-corrected rank
test here is an informative column beside it.
"""

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
"""Fewest samples (rounds, when paired) with a 95 % interval. The widest interval for a median that assumes
nothing of the distribution, [min, max], covers it with probability 1 − 2·0.5ⁿ: 93.75 % at n = 5, 96.9 % at
n = 6. Below 6 no interval can honestly be called 95 %, and a percentile bootstrap, which never reaches past
[min, max], would print one anyway (with one or two samples a zero-width one)."""


@dataclasses.dataclass(frozen=True)
class RatioEstimate:
    """``median(numerator) / median(denominator)`` and its 95% bootstrap interval (NaN when not computable)."""

    ratio: float
    ci_low: float
    ci_high: float


def ratio_of_medians(numerator: Sequence[float], denominator: Sequence[float]) -> RatioEstimate:
    """Ratio of medians with a percentile bootstrap CI over two independent samples.

    Each side is resampled on its own, and the median of a resample is read from the sorted sample at the
    resample's middle ranks (:func:`bootstrap_median_ranks`, one independent stream per side), as
    :func:`paired_ratio` does for the per-round ratios: exact, and a sort and a gather per side instead of
    thousands of resampled medians. The percentile method is used rather than BCa: BCa needs a jackknife that
    degenerates when a sample is constant (identical timings are common for tiny kernels). With fewer than
    ``MIN_INTERVAL_SAMPLES`` samples on either side the point estimate is returned with a NaN interval.
    """
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
    """Median of the per-round ratios ``numerator[i] / denominator[i]`` with a 95% bootstrap CI over rounds.

    Rounds are resampled whole (a paired bootstrap, percentile method, as :func:`ratio_of_medians`).
    It is computed from order statistics rather than with ``scipy.stats.bootstrap(paired=True)``,
    which takes milliseconds a row (seconds for a large run's summary): the median of a resample of
    sorted ratios is the sorted ratio at the resample's middle rank(s), and those ranks do not depend
    on the data (:func:`bootstrap_median_ranks`), so each row costs one sort and one gather. Below
    ``MIN_INTERVAL_SAMPLES`` rounds the interval is NaN.
    """
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
    """For each of ``BOOTSTRAP_RESAMPLES`` resamples of ``n`` values: the 0-based ranks of its lower and upper median.

    A resample draws ``n`` indices uniformly, which is ``floor(n·U)`` for uniform ``U``; flooring
    keeps order, so the k-th smallest index is ``floor(n·U_(k))``, and the k-th order statistic of
    ``n`` uniforms is Beta(k, n−k+1). The next one up is the smallest of the ``n−k`` uniforms above
    it: ``U_(k) + (1 − U_(k))·Beta(1, n−k)``. Drawing these directly is exact and costs
    O(resamples) whatever ``n`` is, where sorting resampled indices would cost O(resamples · n log n).
    Seeded (``stream``: independent draws for the two sides of an unpaired ratio): the same data always gives the
    same interval. Cached, so read-only.
    """
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
