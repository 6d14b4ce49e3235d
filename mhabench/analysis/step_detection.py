"""Where a series of measurements steps: an L1 piecewise-constant fit with a penalty per segment."""

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
    """The indices at which a new level starts (empty: one level), for positive ``values`` (ratios, latencies)."""
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
