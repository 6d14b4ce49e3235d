"""A ratio's interval across replicates: the within-process and the between-process spread together.

Within one process a ratio is the median of per-round ratios, and its bootstrap interval covers what
changes from round to round (``mhabench.analysis.stats.paired_ratio``). It cannot cover what changes
from process to process (allocator history, thread placement, clocks, the neighbours), and on a
2-vCPU VM that is the larger part (docs/findings/replication.md). A replicated run
(``mhabench.run.replicates``) measures the same ratio in R independent processes, and the answer is
read across them.

What we chose: the two-stage (summary-statistics) estimate of a random-effects model. Each replicate
gives its own paired median ratio; the estimate is their geometric mean, and the 95 % interval is
Student's t over their logarithms, ``mean ± t(0.975, R−1) · sd / √R``, back in ratio space. The
variance of one replicate's log ratio is the between-process variance plus its own within-process
variance, so the spread of the replicates' ratios estimates both at once, and the t quantile pays
for estimating it from R values. Why not the hierarchical bootstrap (resample replicates, then
rounds): with the 3 to 5 replicates a run can afford, resampling replicates sees a handful of
distinct means and its percentile interval is too narrow. On the synthetic model of
``tests/test_replication.py`` (true ratio 1.05, a 5 % between-process and 2 % within-process spread,
20 rounds) the t interval covered the true ratio in 94 % of 300 draws with 3 replicates and 93 % with
5, one process's paired interval, even over all the rounds pooled, in 40 %; a one-off simulation of
the same model gave the hierarchical bootstrap 70 % and 88 % (200 draws). Below 2 replicates there is
no between-process information and no interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as scipy_stats

from mhabench.analysis.stats import CONFIDENCE_LEVEL, RatioEstimate

MIN_REPLICATES = 2
"""Fewest replicates whose spread can be estimated at all (and then with t(0.975, 1) = 12.7: very wide)."""


def across_replicates(ratios: Sequence[float]) -> RatioEstimate:
    """The geometric mean of per-replicate ratios with a t interval over their logarithms (NaN interval below 2)."""
    logs = np.log(np.asarray([r for r in ratios if math.isfinite(r) and r > 0], dtype=float))
    if logs.size == 0:
        return RatioEstimate(math.nan, math.nan, math.nan)
    centre = float(logs.mean())
    if logs.size < MIN_REPLICATES:
        return RatioEstimate(math.exp(centre), math.nan, math.nan)
    half_width = float(scipy_stats.t.ppf(0.5 + CONFIDENCE_LEVEL / 2, logs.size - 1) * logs.std(ddof=1))
    half_width /= math.sqrt(logs.size)
    return RatioEstimate(math.exp(centre), math.exp(centre - half_width), math.exp(centre + half_width))


def between_process_range(ratios: Sequence[float]) -> float:
    """``max / min − 1`` of the replicates' ratios: how far apart two processes put the same ratio (NaN below 2)."""
    finite = [r for r in ratios if math.isfinite(r) and r > 0]
    return max(finite) / min(finite) - 1 if len(finite) >= MIN_REPLICATES else math.nan
