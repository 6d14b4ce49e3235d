"""Paired speedups (median of per-round ratios), their fallback, repeats and run-to-run spread."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from synthetic_runs import rounds, row

from mhabench.analysis import stats
from mhabench.analysis.estimate import MEDIANS, PAIRED, shared_rounds
from mhabench.analysis.speedup import speedup_rows
from mhabench.analysis.spread import relative_range, spread_of


def speedups(*rows: dict, baseline: str = "naive") -> pd.DataFrame:
    return speedup_rows(pd.DataFrame(list(rows)), baseline).set_index(["impl", "repeat"])


def test_every_round_twice_as_fast_is_exactly_two() -> None:
    base_ms = [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    result = speedups(row("naive", base_ms), row("fused", [ms / 2 for ms in base_ms])).loc[("fused", 0)]
    assert result["speedup_method"] == PAIRED
    assert (result["speedup"], result["speedup_ci_low"], result["speedup_ci_high"]) == (2.0, 2.0, 2.0)


def test_pairing_follows_the_rounds_not_the_medians() -> None:
    """Same samples shuffled: the ratio of medians is still 4/2 = 2, the per-round ratios are 2/3, 4, 3."""
    result = speedups(row("naive", [2.0, 4.0, 6.0]), row("fused", [3.0, 1.0, 2.0])).loc[("fused", 0)]
    assert stats.ratio_of_medians([2.0, 4.0, 6.0], [3.0, 1.0, 2.0]).ratio == pytest.approx(2.0)
    assert result["speedup"] == pytest.approx(3.0)
    assert result["speedup_method"] == PAIRED


def test_the_baseline_against_itself_is_one_with_no_width() -> None:
    result = speedups(row("naive", [2.0, 4.0, 5.0, 6.0, 7.0, 9.0]), row("fused", [1.0, 2.0, 3.0])).loc[("naive", 0)]
    assert (result["speedup"], result["speedup_ci_low"], result["speedup_ci_high"]) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize(
    ("base_ms", "impl_ms"),
    [([2.0, 4.0, 6.0, 8.0], [1.0, 2.0]), ([2.0, 4.0], [1.0, 2.0]), ([4.0], [2.0])],
    ids=["two shared rounds", "two rounds", "one median (CSV only)"],
)
def test_unaligned_samples_fall_back_to_the_ratio_of_medians(base_ms: list[float], impl_ms: list[float]) -> None:
    result = speedups(row("naive", base_ms), row("fused", impl_ms)).loc[("fused", 0)]
    assert result["speedup_method"] == MEDIANS
    assert result["speedup"] == pytest.approx(np.median(base_ms) / np.median(impl_ms))


def test_a_row_that_left_the_rounds_early_pairs_only_the_rounds_it_shared() -> None:
    """fused left after round 4 (its cap), naive went on and slowed down: the speedup is the 4 shared rounds' 2.0×,
    not the ratio of medians over unequal stretches (51×, what lengths that differ used to fall back to)."""
    naive, fused = row("naive", [2.0, 2.0, 2.0, 2.0, 100.0, 100.0, 100.0, 100.0]), row("fused", [1.0] * 4)
    result = speedups(naive, fused).loc[("fused", 0)]
    assert result["speedup_method"] == PAIRED and result["speedup"] == pytest.approx(2.0)
    assert math.isnan(result["speedup_ci_low"]) and math.isnan(result["speedup_ci_high"])  # 4 rounds: no interval
    six = speedups(naive, row("fused", [1.0] * 6)).loc[("fused", 0)]
    assert six["speedup_method"] == PAIRED and six["speedup"] == pytest.approx(2.0)  # median of 2,2,2,2,100,100
    assert math.isfinite(six["speedup_ci_low"]) and six["speedup_ci_low"] <= six["speedup"] <= six["speedup_ci_high"]


def test_intervals_need_six_samples() -> None:
    """[min, max] covers a median with probability 1 − 2·0.5ⁿ: 93.75 % at 5 samples, so no 95 % interval below 6."""
    five, six = [1.0, 1.1, 0.9, 1.05, 0.95], [1.0, 1.1, 0.9, 1.05, 0.95, 1.02]
    assert stats.MIN_INTERVAL_SAMPLES == 6 and 1 - 2 * 0.5**5 < stats.CONFIDENCE_LEVEL < 1 - 2 * 0.5**6
    for estimate in (stats.paired_ratio(five, five[::-1]), stats.ratio_of_medians(five, six)):
        assert math.isfinite(estimate.ratio) and math.isnan(estimate.ci_low) and math.isnan(estimate.ci_high)
    for estimate in (stats.paired_ratio(six, six[::-1]), stats.ratio_of_medians(six, six)):
        assert estimate.ci_low <= estimate.ratio <= estimate.ci_high and estimate.ci_low < estimate.ci_high


def test_shared_rounds_are_the_common_prefix() -> None:
    assert shared_rounds([1.0, 2.0, 3.0], [4.0]) == ([1.0], [4.0])
    assert shared_rounds([1.0], [4.0, 5.0]) == ([1.0], [4.0])
    assert shared_rounds([], [4.0]) == ([], [])


def test_failed_rows_have_no_speedup() -> None:
    result = speedups(
        row("naive", [], status="oom", error="out of memory"),
        row("fused", [1.0, 2.0, 3.0]),
        row("per_head", [3.0, 4.0, 5.0]),
    )
    assert math.isnan(result.loc[("fused", 0), "speedup"]) and result.loc[("fused", 0), "speedup_method"] == ""
    assert "winner" not in result.columns  # the pick is the run's answer's (analysis.answer), never a column here


def test_paired_interval_is_narrow_when_the_machine_drifts_between_rounds() -> None:
    """30 % speed drift between rounds, 1 % noise within: pairing removes the drift, medians cannot."""
    times = rounds({"naive": 10.0, "fused": 4.0}, count=20, drift=0.3, noise=0.01, seed=3)
    paired = stats.paired_ratio(times["naive"], times["fused"])
    unpaired = stats.ratio_of_medians(times["naive"], times["fused"])
    assert paired.ci_low < 2.5 < paired.ci_high
    assert paired.ci_high - paired.ci_low < 0.1 < unpaired.ci_high - unpaired.ci_low


@pytest.mark.parametrize("n", [4, 5, 12])
def test_median_ranks_have_the_distribution_of_a_resampled_median(n: int) -> None:
    """The order-statistic shortcut against brute force: sort n indices drawn with replacement."""
    drawn = np.sort(np.random.default_rng(7).integers(0, n, (100_000, n)), axis=1)
    for rank, column in zip(stats.bootstrap_median_ranks(n), ((n - 1) // 2, n // 2), strict=True):
        expected = np.bincount(drawn[:, column], minlength=n) / len(drawn)
        assert np.abs(np.bincount(rank, minlength=n) / len(rank) - expected).max() < 0.04


def test_paired_interval_agrees_with_scipy_paired_bootstrap() -> None:
    rng = np.random.default_rng(11)
    base, impl = rng.lognormal(1.0, 0.2, 25), rng.lognormal(0.2, 0.2, 25)
    ours = stats.paired_ratio(base, impl)
    theirs = scipy_stats.bootstrap(
        (base, impl),
        lambda b, i, axis=-1: np.median(b / i, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=20_000,
        method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval
    width = theirs.high - theirs.low
    assert ours.ratio == pytest.approx(float(np.median(base / impl)))
    assert abs(ours.ci_low - theirs.low) < 0.1 * width and abs(ours.ci_high - theirs.high) < 0.1 * width


def test_paired_ratio_refuses_unequal_lengths() -> None:
    with pytest.raises(ValueError, match="equal lengths"):
        stats.paired_ratio([1.0, 2.0, 3.0], [1.0, 2.0])


# --- repeats ----------------------------------------------------------------------------------------


def repeated_rows() -> list[dict]:
    """Three repeats of one case with constant samples: every number below is exact."""
    latencies = [(10.0, 5.0), (11.0, 5.5), (12.0, 4.0)]  # (naive, fused) per repeat: speedups 2, 2, 3
    return [
        row(impl, [ms] * 4, repeat=repeat)
        for repeat, pair in enumerate(latencies)
        for impl, ms in zip(("naive", "fused"), pair, strict=True)
    ]


def test_each_repeat_is_paired_within_itself() -> None:
    result = speedups(*repeated_rows())
    assert [result.loc[("fused", r), "speedup"] for r in range(3)] == [2.0, 2.0, 3.0]
    assert all(result.loc[("fused", r), "speedup_method"] == PAIRED for r in range(3))


def test_repeat_spread_numbers() -> None:
    spread = spread_of(speedup_rows(pd.DataFrame(repeated_rows()), "naive")).set_index("impl")
    fused, naive = spread.loc["fused"], spread.loc["naive"]
    assert fused["repeats"] == 3 and fused["latency_ms_by_repeat"] == [5.0, 5.5, 4.0]
    assert fused["latency_ms"] == 5.0 and fused["latency_spread"] == pytest.approx((5.5 - 4.0) / 5.0)
    assert fused["speedup"] == 2.0 and fused["speedup_spread"] == pytest.approx((3 - 2) / 2)
    assert naive["latency_spread"] == pytest.approx(2 / 11) and naive["speedup_spread"] == 0.0


def test_relative_range_needs_two_finite_values() -> None:
    assert relative_range([2.0, math.nan, 3.0]) == pytest.approx(0.4)
    assert math.isnan(relative_range([2.0])) and math.isnan(relative_range([]))


def test_rows_not_timed_in_shared_rounds_are_never_paired() -> None:
    """Equal sample counts are not enough: a row timed alone (or an older run's row) gets the ratio of medians."""
    import pandas as pd
    from synthetic_runs import row

    from mhabench.analysis.speedup import speedup_rows

    base, other = row("naive", [2.0, 4.0, 6.0]), row("fused", [1.0, 2.0, 3.0])
    paired = speedup_rows(pd.DataFrame([base, other]), "naive").set_index("impl")
    assert paired.loc["fused", "speedup_method"] == "paired"
    elsewhere = {**other, "rounds_id": "other-rounds"}  # e.g. measured again by --resume, or on another shard
    for alone in ({**other, "rounds_id": None}, {k: v for k, v in other.items() if k != "rounds_id"}, elsewhere):
        frame = speedup_rows(pd.DataFrame([base, alone]), "naive").set_index("impl")
        assert frame.loc["fused", "speedup_method"] == "medians" and frame.loc["fused", "speedup"] == 2.0
