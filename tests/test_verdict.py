"""The change rule: an interval wholly past the threshold is a change, wholly inside it the same, else unclear."""

import math

import pytest

from mhabench.analysis.verdict import Change, judge_change, widened


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1.066, 1.311, Change.SLOWER),  # wholly above 1.05: slower whatever the p-value
        (0.967, 1.187, Change.UNCLEAR),  # reaches +19 %: not "same"
        (0.98, 1.03, Change.SAME),
        (0.70, 0.90, Change.FASTER),
        (0.90, 0.96, Change.UNCLEAR),  # crosses 1/1.05
        (math.nan, math.nan, Change.UNCLEAR),
    ],
)
def test_interval_against_threshold(low: float, high: float, expected: Change) -> None:
    assert judge_change(low, high, threshold=0.05) is expected


def test_between_process_spread_turns_a_small_change_unclear() -> None:
    assert judge_change(1.07, 1.09, threshold=0.05) is Change.SLOWER
    assert judge_change(1.07, 1.09, threshold=0.05, between_process_spread=0.05) is Change.UNCLEAR
    assert widened(1.0, 1.0, 0.1) == pytest.approx((1 / 1.1, 1.1))
