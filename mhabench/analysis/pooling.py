"""Several runs' estimates of one ratio, each with its 95 % interval, pooled into one estimate and interval.

Runs of one commit measure the same code, but a machine moves between processes by more than one run's
interval shows, so the runs disagree by more than their intervals allow. A random-effects pool
(DerSimonian–Laird, the standard of meta-analysis) takes that into account: in log space each run is
weighted by ``1 / (its variance + τ²)``, where ``τ²`` is the between-run variance the runs' scatter shows
beyond their own intervals. A run with a wild, wide interval (a noisy neighbour hit it) weighs little;
runs that agree give a narrower interval than any one of them; runs that disagree, a wider one. The
interval uses the normal quantile, which is optimistic for two or three runs (τ² is then poorly known):
the history gate widens it again by the series' own point-to-point spread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as scipy_stats

from mhabench.analysis.stats import CONFIDENCE_LEVEL, RatioEstimate

Z_95 = float(scipy_stats.norm.ppf(0.5 + CONFIDENCE_LEVEL / 2))
MIN_LOG_SE = 1e-6
"""Floor of one run's standard error (a zero-width interval: every sample identical) so its weight is finite."""


def pooled_ratio(values: Sequence[float], lows: Sequence[float], highs: Sequence[float]) -> RatioEstimate:
    """The random-effects pool of positive ratios with their 95 % intervals (NaN if any input is not usable)."""
    logs = np.log(np.asarray(values, dtype=float))
    se = (np.log(np.asarray(highs, dtype=float)) - np.log(np.asarray(lows, dtype=float))) / (2 * Z_95)
    if logs.size == 0 or not (np.all(np.isfinite(logs)) and np.all(np.isfinite(se))):
        return RatioEstimate(math.nan, math.nan, math.nan)
    if logs.size == 1:  # one run: its own estimate and interval, as its bootstrap gave them (often asymmetric)
        return RatioEstimate(float(values[0]), float(lows[0]), float(highs[0]))
    variance = np.maximum(se, MIN_LOG_SE) ** 2
    weights = 1 / variance
    fixed = float(np.sum(weights * logs) / np.sum(weights))
    q = float(np.sum(weights * (logs - fixed) ** 2))
    c = float(np.sum(weights) - np.sum(weights**2) / np.sum(weights))
    tau2 = max(0.0, (q - (logs.size - 1)) / c) if c > 0 else 0.0
    random_weights = 1 / (variance + tau2)
    center = float(np.sum(random_weights * logs) / np.sum(random_weights))
    half = Z_95 * math.sqrt(1 / float(np.sum(random_weights)))
    return RatioEstimate(math.exp(center), math.exp(center - half), math.exp(center + half))
