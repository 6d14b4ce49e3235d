"""The history as series: one per case, implementation and machine fingerprint, points in commit order,
and the change points found along them.

A point is one commit of the code under test (a dirty tree is its own point, ``abc1234+dirty``): every
run of that commit pools into it. Points are ordered by the commit's time, then by when it was first
measured. Series never mix fingerprints; where one (case, implementation) moves to a new fingerprint (a
torch upgrade, a new driver), the change between the last level on the old one and the first level on
the new one is shown with the environment diff as its cause. Inside a series, steps are found by
:mod:`mhabench.analysis.step_detection` and each is judged by :func:`mhabench.analysis.verdict.judge_change`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mhabench.analysis import stats
from mhabench.analysis.estimate import median_interval, within_process
from mhabench.analysis.pooling import pooled_ratio
from mhabench.analysis.speedup import DEFAULT_BASELINE
from mhabench.analysis.step_detection import change_points, segments
from mhabench.analysis.verdict import Change, judge_change
from mhabench.errors import InputError
from mhabench.results.fingerprint import FINGERPRINT_FIELDS, Fingerprint
from mhabench.results.schema import RowStatus


@dataclasses.dataclass(frozen=True)
class Metric:
    """A figure a history can follow: its stored columns, unit, and which direction is worse."""

    name: str
    column: str
    low: str | None
    high: str | None
    unit: str
    higher_is_worse: bool
    description: str


METRICS = {
    metric.name: metric
    for metric in (
        Metric("ratio", "ratio", "ratio_low", "ratio_high", "× baseline", True, "latency / the run's baseline, paired"),
        Metric("latency", "latency_ms", "latency_low_ms", "latency_high_ms", "ms", True, "median latency"),
        Metric(
            "tflops", "useful_tflops", "useful_tflops_low", "useful_tflops_high", "TFLOP/s", False, "useful TFLOP/s"
        ),
        Metric("bytes", "measured_bytes", None, None, "bytes", True, "bytes counted from the dispatched ops"),
        Metric("energy", "energy_per_call_j", None, None, "J", True, "GPU energy per call (NVML)"),
    )
}
DEFAULT_METRIC = "ratio"
MIN_POOLED_INTERVAL = stats.MIN_INTERVAL_SAMPLES
"""Runs from which a metric without per-run intervals gets a bootstrap interval over runs (else min–max)."""


def metric_named(name: str) -> Metric:
    if name not in METRICS:
        raise InputError(f"--metric: unknown metric {name!r}; known: {', '.join(METRICS)}")
    return METRICS[name]


@dataclasses.dataclass(frozen=True)
class Point:
    """One commit's value in a series: the median over its runs, with an interval."""

    commit: str
    dirty: bool
    value: float
    low: float
    high: float
    runs: tuple[float, ...]
    """The value of each run (each repeat) pooled into the point."""
    first_run: str
    run_intervals: tuple[tuple[float, float], ...] = ()
    """Each run's own 95 % interval, where the metric has one (in the order of ``runs``)."""

    @property
    def label(self) -> str:
        return f"{self.commit[:10]}{'+dirty' if self.dirty else ''}"


@dataclasses.dataclass(frozen=True)
class Step:
    """A change between two levels: where, how large (after / before) with its interval, and why."""

    before: str
    after: str
    """The last commit of the old level and the first of the new: the change is in ``before..after``."""
    size: float
    low: float
    high: float
    change: Change
    environment: dict[str, tuple[str | None, str | None]]
    """Empty inside a series; the fingerprint fields that changed where a series hands over to the next."""


@dataclasses.dataclass(frozen=True)
class Series:
    case_id: str
    case: str
    impl: str
    fingerprint: Fingerprint
    points: tuple[Point, ...]
    steps: tuple[Step, ...]
    baseline: str = ""
    """The ratio metric's baseline (empty for the others): a ratio to another implementation is another series."""

    @property
    def impl_label(self) -> str:
        """The implementation, ``÷ baseline`` added where a ratio's baseline is not the default one."""
        other = self.baseline and self.baseline != DEFAULT_BASELINE
        return f"{self.impl} ÷ {self.baseline}" if other else self.impl

    @property
    def name(self) -> str:
        return f"{self.case} · {self.impl_label} · {self.fingerprint.key}"


@dataclasses.dataclass(frozen=True)
class History:
    metric: Metric
    series: tuple[Series, ...]
    handovers: tuple[tuple[Series, Series, Step], ...]
    """Consecutive fingerprints of one (case, implementation): the old series, the new one, the change."""


def build(
    runs: pd.DataFrame,
    rows: pd.DataFrame,
    metric: Metric,
    threshold: float,
    cases: Sequence[str] = (),
    impls: Sequence[str] = (),
) -> History:
    """The store's rows as series of ``metric`` (filtered by case id or label and implementation)."""
    _check_filters(rows, cases, impls)  # a typo in CI's --impl must not pass the gate forever
    chosen = _chosen_rows(rows, metric, cases, impls)
    if chosen.empty and (cases or impls):
        wanted = " ".join([*(f"--case {c!r}" for c in cases), *(f"--impl {i!r}" for i in impls)])
        why = (
            "the baseline has no ratio series" if metric.name == "ratio" else f"no such row has a {metric.column} value"
        )
        raise InputError(f"--case/--impl: no {metric.name} series has {wanted} ({why})")
    fingerprints = _fingerprints(runs)
    keys = ["case_id", "impl", "fingerprint_key", *(["baseline"] if metric.name == "ratio" else [])]
    series = [_series(group, metric, fingerprints[key[2]], threshold) for key, group in chosen.groupby(keys, sort=True)]
    series = [s for s in series if s.points]
    return History(metric, tuple(series), tuple(_handovers(series, threshold)))


def _check_filters(rows: pd.DataFrame, cases: Sequence[str], impls: Sequence[str]) -> None:
    """Each ``--case`` and ``--impl`` must name something this history holds: one line naming the value."""
    known_cases = set(rows["case_id"]) | set(rows["case"])
    for value in cases:
        if value not in known_cases:
            raise InputError(f"--case: {value!r} is no case id or label in this history")
    known_impls = sorted(set(rows["impl"]))
    for value in impls:
        if value not in known_impls:
            raise InputError(f"--impl: {value!r} is not in this history (it has {', '.join(known_impls)})")


def _chosen_rows(rows: pd.DataFrame, metric: Metric, cases: Sequence[str], impls: Sequence[str]) -> pd.DataFrame:
    keep = (rows["status"] == RowStatus.OK) & pd.to_numeric(rows[metric.column], errors="coerce").gt(0)
    if metric.name == "ratio":
        keep &= rows["impl"] != rows["baseline"]  # the baseline's ratio to itself is 1 by construction
    if cases:
        keep &= rows["case_id"].isin(cases) | rows["case"].isin(cases)
    if impls:
        keep &= rows["impl"].isin(impls)
    return rows[keep]


def _fingerprints(runs: pd.DataFrame) -> dict[str, Fingerprint]:
    found = {}
    for record in runs.to_dict("records"):
        environment = json.loads(record["environment"]) if record.get("environment") else {}
        found[record["fingerprint_key"]] = Fingerprint.of(environment) if environment else _from_columns(record)
    return found


def _from_columns(record: dict) -> Fingerprint:
    return Fingerprint(**{name: record.get(name) for name in FINGERPRINT_FIELDS})


def _series(group: pd.DataFrame, metric: Metric, fingerprint: Fingerprint, threshold: float) -> Series:
    first = group.iloc[0]
    points = _points(group, metric)
    baseline = str(first["baseline"]) if metric.name == "ratio" else ""
    return Series(
        str(first["case_id"]),
        str(first["case"]),
        str(first["impl"]),
        fingerprint,
        points,
        _steps(points, threshold),
        baseline,
    )


def _points(group: pd.DataFrame, metric: Metric) -> tuple[Point, ...]:
    frame = group.assign(
        _dirty=group["dirty"].fillna(0).astype(bool),
        _time=pd.to_numeric(group["commit_time"], errors="coerce"),
    )
    ordered = []
    for (commit, dirty), runs in frame.groupby(["commit", "_dirty"], sort=False):
        commit_time = runs["_time"].min()
        first_run = str(runs["started_at"].min())
        ordered.append(((commit_time if math.isfinite(commit_time) else math.inf, first_run), commit, dirty, runs))
    ordered.sort(key=lambda item: item[0])
    return tuple(_point(commit, dirty, runs, metric) for _, commit, dirty, runs in ordered)


def _point(commit: str, dirty: bool, runs: pd.DataFrame, metric: Metric) -> Point:
    """The runs of one commit pooled: random-effects over their intervals where every run has one (one run: its
    own), else the median with a bootstrap over runs (from ``MIN_POOLED_INTERVAL`` runs) or their min–max."""
    values = [float(v) for v in runs[metric.column]]
    intervals = _run_intervals(runs, metric)
    if intervals:
        pooled = pooled_ratio(values, [low for low, _ in intervals], [high for _, high in intervals])
    elif len(values) >= MIN_POOLED_INTERVAL:
        pooled = median_interval(values)
    else:
        pooled = stats.RatioEstimate(float(np.median(values)), min(values), max(values))
    first = str(runs["started_at"].min())
    return Point(commit, dirty, pooled.ratio, pooled.ci_low, pooled.ci_high, tuple(values), first, intervals)


def _run_intervals(runs: pd.DataFrame, metric: Metric) -> tuple[tuple[float, float], ...]:
    """Each run's interval, or () when the metric has none or any run lacks one."""
    if metric.low is None or metric.high is None:
        return ()
    lows = pd.to_numeric(runs[metric.low], errors="coerce")
    highs = pd.to_numeric(runs[metric.high], errors="coerce")
    pairs = tuple((float(low), float(high)) for low, high in zip(lows, highs, strict=True))
    usable = all(math.isfinite(low) and math.isfinite(high) and 0 < low <= high for low, high in pairs)
    return pairs if usable else ()


def _steps(points: Sequence[Point], threshold: float) -> tuple[Step, ...]:
    starts = change_points([point.value for point in points])
    levels = segments(len(points), starts)
    return tuple(
        level_change(points[before.start : before.stop], points[after.start : after.stop], threshold, {})
        for before, after in itertools.pairwise(levels)
    )


def level_change(before: Sequence[Point], after: Sequence[Point], threshold: float, environment: dict) -> Step:
    """The change from one level to the next: each level's runs pooled (as a point's are), after / before.

    The interval combines the two pooled intervals in log space (independent levels). Runs without
    intervals fall back to the unpaired bootstrap of the ratio of medians, and with too few runs for that,
    to the boundary points' intervals divided crosswise (wider, not narrower).
    """
    old, new = _level(before), _level(after)
    if math.isfinite(old.ci_low) and math.isfinite(new.ci_low):
        log_half = math.hypot(*(math.log(p.ci_high / p.ci_low) / 2 for p in (old, new)))
        size = new.ratio / old.ratio
        low, high = size * math.exp(-log_half), size * math.exp(log_half)
    else:
        runs_before = [value for point in before for value in point.runs]
        runs_after = [value for point in after for value in point.runs]
        estimate, _ = within_process(runs_after, runs_before, same_rounds=False)
        size, low, high = estimate.ratio, estimate.ci_low, estimate.ci_high
        if not (math.isfinite(low) and math.isfinite(high)):
            low, high = after[0].low / before[-1].high, after[0].high / before[-1].low
    return Step(before[-1].label, after[0].label, size, low, high, judge_change(low, high, threshold), environment)


def _level(points: Sequence[Point]) -> stats.RatioEstimate:
    """Every run of a level's points pooled (NaN when a run has no interval)."""
    if not all(point.run_intervals for point in points):
        return stats.RatioEstimate(math.nan, math.nan, math.nan)
    values = [value for point in points for value in point.runs]
    intervals = [interval for point in points for interval in point.run_intervals]
    return pooled_ratio(values, [low for low, _ in intervals], [high for _, high in intervals])


def _handovers(series: Sequence[Series], threshold: float) -> list[tuple[Series, Series, Step]]:
    """Where one (case, implementation) moves from one fingerprint to the next, in the order they were measured."""
    by_pair: dict[tuple[str, str, str], list[Series]] = {}
    for one in series:
        by_pair.setdefault((one.case_id, one.impl, one.baseline), []).append(one)
    found = []
    for chain in by_pair.values():
        chain.sort(key=lambda s: min(point.first_run for point in s.points))
        for old, new in itertools.pairwise(chain):
            before = _last_level(old.points)
            after = _first_level(new.points)
            diff = old.fingerprint.differences(new.fingerprint)
            found.append((old, new, level_change(before, after, threshold, diff)))
    return found


def _last_level(points: Sequence[Point]) -> Sequence[Point]:
    starts = change_points([point.value for point in points])
    return points[starts[-1] :] if starts else points


def _first_level(points: Sequence[Point]) -> Sequence[Point]:
    starts = change_points([point.value for point in points])
    return points[: starts[0]] if starts else points
