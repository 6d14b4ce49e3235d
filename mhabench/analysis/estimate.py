"""The one estimator of two rows' time ratio and its 95 % interval, within one process or across several.

Within one process (one case, one repeat) the implementations are timed in interleaved rounds: sample i of
every row comes from round i, so both sides of a ratio saw the same machine state. A row that spent its
``max_run_time_s`` first left the rounds early, so two rows share exactly their first ``min(len)`` rounds
(:func:`shared_rounds`). The ratio is then the median of the per-round ratios over those rounds, with a
bootstrap interval that resamples rounds (:func:`mhabench.analysis.stats.paired_ratio`): a slow round slows
both sides and cancels. Rows not timed in the same rounds (an older run, a CSV-only run, fewer than
``MIN_PAIRED_ROUNDS`` shared rounds) get the ratio of medians with an unpaired bootstrap
(:func:`mhabench.analysis.stats.ratio_of_medians`). Either interval is NaN below
``stats.MIN_INTERVAL_SAMPLES``.

Across processes (a replicated run, ``replicates: N``) each process gives its own within-process ratio, and the
estimate is their geometric mean with Student's t interval over their logarithms (:func:`across_processes`):
the two-stage estimate of a random-effects model, whose spread holds the between-process and the
within-process variance at once. Why not the hierarchical bootstrap (resample processes, then rounds): with the
3 to 5 processes a run can afford, resampling processes sees a handful of distinct means and its percentile
interval is too narrow. On the synthetic model of ``tests/test_replication.py`` (true ratio 1.05, a 5 %
between-process and 2 % within-process spread, 20 rounds) the t interval covered the true ratio in 94 % of 300
draws with 3 processes and 93 % with 5; one process's paired interval, even over all the rounds pooled, in 40 %.
Below ``MIN_REPLICATES`` processes there is no between-process information and no interval. Two runs share no
process, so a change between them is read from each side's per-process medians (:func:`two_sided_across`).

Every speedup a view prints, every lead a pick rests on, goes through :func:`row_ratio` or
:func:`rows_ratio_across`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import special as scipy_special
from scipy import stats as scipy_stats

from mhabench.analysis import stats
from mhabench.analysis.stats import CONFIDENCE_LEVEL, RatioEstimate
from mhabench.results.cells import cell
from mhabench.results.columns import LATENCY_MS, ROUNDS_ID, SAMPLES_COLUMN, STATUS
from mhabench.results.schema import RowStatus

Row = Mapping[str, Any]
"""One result row: a record dict (fast over a large run) or a pandas Series."""

MIN_PAIRED_ROUNDS = 3
"""Fewer shared rounds than this are too few to pair on: such rows use the ratio of medians (over every sample
of each side) instead. Their interval needs ``stats.MIN_INTERVAL_SAMPLES`` either way."""
MIN_REPLICATES = 2
"""Fewest processes whose spread can be estimated at all (and then with t(0.975, 1) = 12.7: very wide)."""
MIN_TWO_SIDED_PROCESSES = 3
"""Processes on both sides of a two-run ratio together below which its t interval has no degree of freedom."""


class Method(str, enum.Enum):
    """How a ratio was estimated: paired per-round ratios, the ratio of medians, or across processes."""

    PAIRED = "paired"
    MEDIANS = "medians"
    ACROSS = "replicates"

    __str__ = str.__str__


PAIRED, MEDIANS, ACROSS = Method


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A ratio of two rows' times with its interval, how it was estimated and what it rests on: ``rounds``
    (paired: the shared rounds; medians: the fewer side's samples; across: the processes both ran in) and
    ``processes`` (1 within one process). ``unpaired`` names why a one-process ratio is not paired."""

    ratio: float
    ci_low: float
    ci_high: float
    method: Method
    rounds: int
    processes: int = 1
    unpaired: str = ""

    @property
    def interval(self) -> RatioEstimate:
        return RatioEstimate(self.ratio, self.ci_low, self.ci_high)

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.ci_low) and math.isfinite(self.ci_high)


# --- reading a row's samples ------------------------------------------------------------------------------------------


def raw_samples(row: Row | None) -> list[float]:
    """The raw latency samples the run stored for a row, [] where it stored none (a CSV-only run)."""
    times = row.get(SAMPLES_COLUMN) if row is not None else None
    return [float(t) for t in times] if isinstance(times, list | tuple | np.ndarray) and len(times) else []


def samples_of(row: Row | None) -> list[float]:
    """The raw latency samples of a row; a CSV-only run has just the median (one point, no CI)."""
    if row is None:
        return []
    if times := raw_samples(row):
        return times
    latency = row.get(LATENCY_MS)
    return [float(latency)] if latency is not None and math.isfinite(float(latency)) else []


def is_ok(row: Row) -> bool:
    return row.get(STATUS) == RowStatus.OK and bool(samples_of(row))


def rounds_of(row: Row | None) -> str | None:
    """The id of the rounds the row's samples come from (None: timed alone, or a run older than the column)."""
    value = row.get(ROUNDS_ID) if row is not None else None
    return value if isinstance(value, str) and value else None


def shared_rounds(first_ms: list[float], second_ms: list[float]) -> tuple[list[float], list[float]]:
    """The samples of the rounds both rows took part in: their first ``min(len)``.

    Sample i of a row is round i, and a row that left the rounds early never came back
    (:func:`mhabench.measure.rounds.run_rounds`), so the rounds two rows share are a common prefix.
    """
    shared = min(len(first_ms), len(second_ms))
    return first_ms[:shared], second_ms[:shared]


def key_of(row: Row, key: Sequence[str]) -> tuple[Any, ...]:
    """A row's values of the columns ``key`` as one hashable value; a missing one (NaN, None) is None, so that it
    matches a missing one in another row."""
    return tuple(cell(row.get(column)) for column in key)


def by_key(rows: Iterable[Row], key: Sequence[str]) -> dict[tuple[Any, ...], list[Row]]:
    """``rows`` per value of the columns ``key``, in first-seen order (:func:`key_of`)."""
    found: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        found.setdefault(key_of(row, key), []).append(row)
    return found


# --- within one process -----------------------------------------------------------------------------------------------


def within_process(
    numerator_ms: list[float], denominator_ms: list[float], same_rounds: bool = True
) -> tuple[RatioEstimate, Method]:
    """``numerator / denominator``: paired over the rounds both took part in when they were timed in the same
    rounds and share at least ``MIN_PAIRED_ROUNDS``, else the ratio of medians; and which one it was."""
    numerator_shared, denominator_shared = shared_rounds(numerator_ms, denominator_ms)
    if same_rounds and len(numerator_shared) >= MIN_PAIRED_ROUNDS:
        return stats.paired_ratio(numerator_shared, denominator_shared), PAIRED
    return stats.ratio_of_medians(numerator_ms, denominator_ms), MEDIANS


def median_interval(values: Sequence[float]) -> RatioEstimate:
    """The median of one set of values with the same bootstrap interval as a paired ratio's (the ratio of each value
    to 1): one row's latency over its samples, or one commit's runs of a metric (NaN interval below
    ``stats.MIN_INTERVAL_SAMPLES``)."""
    return stats.paired_ratio(values, [1.0] * len(values))


def row_ratio(numerator: Row, denominator: Row) -> Estimate:
    """``numerator``'s time over ``denominator``'s within one process, paired when both were timed in the same
    rounds and share enough of them; else the ratio of medians, with the reason it could not be paired."""
    same_rounds = rounds_of(denominator) is not None and rounds_of(denominator) == rounds_of(numerator)
    numerator_ms, denominator_ms = samples_of(numerator), samples_of(denominator)
    found, method = within_process(numerator_ms, denominator_ms, same_rounds)
    shared = min(len(numerator_ms), len(denominator_ms))
    if method == PAIRED:
        unpaired = ""
    elif not (raw_samples(numerator) and raw_samples(denominator)):
        unpaired = "no_raw_samples"
    elif not same_rounds:
        unpaired = "not_same_rounds"
    else:
        unpaired = "too_few_shared_rounds"
    return Estimate(found.ratio, found.ci_low, found.ci_high, method, shared, 1, unpaired)


# --- across processes -------------------------------------------------------------------------------------------------


def across_processes(ratios: Sequence[float]) -> RatioEstimate:
    """The geometric mean of per-process ratios with a t interval over their logarithms (NaN interval below 2)."""
    logs = np.log(np.asarray([r for r in ratios if math.isfinite(r) and r > 0], dtype=float))
    if logs.size == 0:
        return RatioEstimate(math.nan, math.nan, math.nan)
    centre = math.exp(float(logs.mean()))
    if logs.size < MIN_REPLICATES:
        return RatioEstimate(centre, math.nan, math.nan)
    if np.ptp(logs) == 0:  # every process agreed exactly: a zero-width interval (scipy's would be NaN)
        return RatioEstimate(centre, centre, centre)
    low, high = t_interval(logs)
    return RatioEstimate(centre, math.exp(low), math.exp(high))


def t_interval(values: np.ndarray) -> tuple[float, float]:
    """The mean's two-sided Student's t interval at ``CONFIDENCE_LEVEL``: the same operations as
    ``scipy.stats.ttest_1samp(values, 0).confidence_interval(CONFIDENCE_LEVEL)``, so the same floats, without its
    per-call array-API dispatch (milliseconds, and a run's answer reads thousands of these intervals)."""
    mean = values.mean()
    size = values.size
    variance = np.mean((values - mean) ** 2) * (size / (size - 1))
    error = np.sqrt(variance / size)
    low, high = _t_quantiles(size - 1)
    return float(low * error + mean), float(high * error + mean)


@functools.cache
def _t_quantiles(degrees: int) -> tuple[np.float64, np.float64]:
    """Student's t quantiles bounding ``CONFIDENCE_LEVEL`` in the middle, for ``degrees`` degrees of freedom."""
    tail = (1 - np.float64(CONFIDENCE_LEVEL)) / 2
    low, high = scipy_special.stdtrit(degrees, np.stack((tail, 1 - tail)))
    return low, high


def two_sided_across(numerator_ms: Sequence[float], denominator_ms: Sequence[float]) -> tuple[RatioEstimate, float]:
    """``numerator / denominator`` from each side's per-process median latencies where the two sides ran in
    different processes (two runs): the ratio of their geometric means, Student's t interval for the difference
    of the mean log medians with the variance pooled over both sides (one machine: equal variances), and that
    test's p-value. No interval below ``MIN_TWO_SIDED_PROCESSES`` processes in all, or with one process a side
    (no spread to estimate)."""
    numerator, denominator = (np.log(np.asarray(side, dtype=float)) for side in (numerator_ms, denominator_ms))
    if numerator.size == 0 or denominator.size == 0:
        return RatioEstimate(math.nan, math.nan, math.nan), math.nan
    ratio = math.exp(float(numerator.mean() - denominator.mean()))
    if numerator.size + denominator.size < MIN_TWO_SIDED_PROCESSES or max(numerator.size, denominator.size) < 2:
        return RatioEstimate(ratio, math.nan, math.nan), math.nan
    if np.ptp(numerator) == 0 and np.ptp(denominator) == 0:  # every process agreed exactly: no spread, no test
        return RatioEstimate(ratio, ratio, ratio), math.nan
    test = scipy_stats.ttest_ind(numerator, denominator, equal_var=True)
    interval = test.confidence_interval(CONFIDENCE_LEVEL)
    return RatioEstimate(ratio, math.exp(interval.low), math.exp(interval.high)), float(test.pvalue)


def rows_ratio_across(numerator: Mapping[int, Row], denominator: Mapping[int, Row]) -> Estimate:
    """``numerator``'s time over ``denominator``'s, each given by process: within each process both ran in (paired
    when timed in the same rounds), combined across those processes."""
    both = sorted(set(numerator) & set(denominator))
    ratios = [row_ratio(numerator[process], denominator[process]).ratio for process in both]
    found = across_processes(ratios)
    return Estimate(found.ratio, found.ci_low, found.ci_high, ACROSS, len(both), len(both))


def rows_ratio_by_process(numerator: Mapping[int, Row], denominator: Mapping[int, Row]) -> Estimate:
    """``numerator``'s time over ``denominator``'s, each given by process (two or more processes both ran ok in:
    read across them, :func:`rows_ratio_across`; one: that process's own ratio and interval, :func:`row_ratio`)."""
    both = [process for process in numerator if process in denominator]
    if len(both) == 1:
        return row_ratio(numerator[both[0]], denominator[both[0]])
    return rows_ratio_across(numerator, denominator)


def between_process_range(ratios: Sequence[float]) -> float:
    """``max / min − 1`` of the processes' ratios: how far apart two processes put the same ratio (NaN below 2)."""
    finite = [r for r in ratios if math.isfinite(r) and r > 0]
    return max(finite) / min(finite) - 1 if len(finite) >= MIN_REPLICATES else math.nan
