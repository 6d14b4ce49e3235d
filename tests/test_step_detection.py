"""Step detection (L1 piecewise-constant fit with a penalty) on synthetic series whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from mhabench.analysis.step_detection import MIN_NOISE, change_points, noise_of, segments


def noisy(levels: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """``levels`` times log-normal noise of relative size ``noise``."""
    return levels * np.exp(np.random.default_rng(seed).normal(0, noise, levels.size))


@pytest.mark.parametrize("seed", range(20))
def test_a_10_percent_step_in_2_percent_noise_is_found_where_it_is(seed: int) -> None:
    levels = np.where(np.arange(40) >= 25, 1.10, 1.0)
    assert change_points(noisy(levels, 0.02, seed)) == [25]


@pytest.mark.parametrize("seed", range(20))
def test_a_1_percent_drift_under_2_percent_noise_is_no_step(seed: int) -> None:
    assert change_points(noisy(np.linspace(1.0, 1.01, 40), 0.02, seed)) == []


@pytest.mark.parametrize("seed", range(5))
def test_a_step_near_the_end_of_a_short_series_is_found(seed: int) -> None:
    """What CI sees: a few points after the regression landed."""
    levels = np.where(np.arange(12) >= 8, 1.3, 1.0)
    assert change_points(noisy(levels, 0.02, seed)) == [8]


def test_two_steps_are_both_found() -> None:
    levels = np.concatenate([np.full(15, 1.0), np.full(15, 1.25), np.full(15, 0.9)])
    assert change_points(noisy(levels, 0.02, 3)) == [15, 30]


def test_one_wild_point_is_not_a_step() -> None:
    values = noisy(np.ones(30), 0.02, 4)
    values[12] *= 1.5
    assert change_points(values) == []


def test_identical_values_do_not_split_and_the_noise_has_a_floor() -> None:
    assert noise_of(np.zeros(10)) == MIN_NOISE
    assert change_points([2.0] * 10) == []
    assert change_points([1.0]) == []


def test_segments_cover_the_series_in_order() -> None:
    assert segments(10, [3, 7]) == [range(0, 3), range(3, 7), range(7, 10)]
    assert segments(4, []) == [range(0, 4)]
