"""Where a series of measurements steps: an L1 piecewise-constant fit with a penalty per segment.

The method is asv's (airspeed velocity's ``step_detect``): fit the log values by constant segments,
minimising the sum of absolute deviations from each segment's median plus a penalty ``γ`` for every
segment, and solve it exactly by dynamic programming over the end of the last segment (optimal
partitioning, O(n²) segment costs). Absolute deviations and medians, not squares and means, so one wild
point costs its distance once instead of dragging a segment's level; log values, so a 10 % step is the
same size at 1 ms and at 100 ms.

The penalty is ``PENALTY_FACTOR · σ · ln(n)``: ``σ`` is the series' own noise, estimated robustly from
the differences of consecutive points (a step moves one difference, not the median of them), and
``ln(n)`` grows the price of a segment with the chances a long series offers to fit noise. The factor
was set on synthetic series (``tests/test_step_detection.py``): a 10 % step in 2 % noise is found and a
1 % drift across the series under 2 % noise gives no step.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

PENALTY_FACTOR = 4.0
MIN_NOISE = 0.002
"""Floor of the noise estimate (0.2 % in log units): a series of identical values must not split on rounding."""
MAX_POINTS = 400
"""Longest series fitted whole (the segment costs are O(n²) numpy sums); a longer one is fitted on its newest points."""
_MAD_TO_SIGMA = 1.4826


def noise_of(log_values: Sequence[float]) -> float:
    """Robust standard deviation of a series' points: MAD of consecutive differences / √2 (a step moves one)."""
    values = np.asarray(log_values, dtype=float)
    if values.size < 3:
        return MIN_NOISE
    differences = np.diff(values)
    mad = float(np.median(np.abs(differences - np.median(differences))))
    return max(_MAD_TO_SIGMA * mad / math.sqrt(2), MIN_NOISE)


def _segment_costs(values: np.ndarray) -> np.ndarray:
    """``cost[i, j]``: sum of |v − median| over ``values[i:j]`` (j > i), the L1 cost of one segment."""
    n = values.size
    cost = np.full((n + 1, n + 1), np.inf)
    for start in range(n):
        for end in range(start + 1, n + 1):
            segment = np.sort(values[start:end])
            half = segment.size // 2
            cost[start, end] = segment[segment.size - half :].sum() - segment[:half].sum()
    return cost


def change_points(values: Sequence[float], penalty_factor: float = PENALTY_FACTOR) -> list[int]:
    """The indices at which a new level starts (empty: one level), for positive ``values`` (ratios, latencies).

    Non-finite or non-positive values are not allowed here; the caller leaves such points out.
    """
    logs = np.log(np.asarray(values, dtype=float))
    if logs.size < 2:
        return []
    offset = max(logs.size - MAX_POINTS, 0)
    logs = logs[offset:]
    n = logs.size
    penalty = penalty_factor * noise_of(logs) * math.log(n)
    cost = _segment_costs(logs)
    best = np.full(n + 1, np.inf)
    best[0] = -penalty  # the first segment is free: only each further one pays
    last_start = np.zeros(n + 1, dtype=int)
    for end in range(1, n + 1):
        candidates = best[:end] + cost[:end, end] + penalty
        last_start[end] = int(np.argmin(candidates))
        best[end] = candidates[last_start[end]]
    starts, end = [], n
    while end > 0:
        starts.append(int(last_start[end]))
        end = last_start[end]
    return sorted(offset + start for start in starts if start > 0)


def segments(count: int, starts: Sequence[int]) -> list[range]:
    """The index ranges of the levels that ``change_points`` found in a series of ``count`` points."""
    bounds = [0, *starts, count]
    return [range(low, high) for low, high in itertools.pairwise(bounds) if high > low]
