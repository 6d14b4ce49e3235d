"""Random-effects pooling of several runs' ratios with their intervals."""

from __future__ import annotations

import math

import pytest

from mhabench.analysis.pooling import pooled_ratio


def test_one_run_pools_to_itself() -> None:
    pooled = pooled_ratio([1.2], [1.1], [1.3])
    assert (pooled.ratio, pooled.ci_low, pooled.ci_high) == (1.2, 1.1, 1.3)  # an asymmetric interval stays so


def test_runs_that_agree_give_a_narrower_interval_than_any_one() -> None:
    pooled = pooled_ratio([1.0, 1.0, 1.0], [0.9, 0.9, 0.9], [1.1, 1.1, 1.1])
    assert pooled.ratio == pytest.approx(1.0, abs=0.01)
    assert pooled.ci_high / pooled.ci_low < 1.1 / 0.9


def test_runs_that_disagree_beyond_their_intervals_widen_it() -> None:
    """Two tight runs 30 % apart: the between-run variance (τ²) makes the pool cover both."""
    pooled = pooled_ratio([1.0, 1.3], [0.99, 1.287], [1.01, 1.313])
    assert pooled.ci_low < 1.0 and pooled.ci_high > 1.3


def test_a_wild_run_with_a_wide_interval_weighs_little() -> None:
    pooled = pooled_ratio([1.0, 1.01, 0.05], [0.95, 0.96, 0.004], [1.05, 1.06, 16.0])
    assert pooled.ratio == pytest.approx(1.0, abs=0.05)


def test_missing_intervals_give_nan() -> None:
    assert math.isnan(pooled_ratio([1.0], [math.nan], [1.1]).ratio)
    assert math.isnan(pooled_ratio([], [], []).ratio)
