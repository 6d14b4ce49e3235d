"""What two runs recorded about their machine, and what ``compare`` may conclude from it.

Every run times a fixed reference workload (:mod:`mhabench.measure.drift`) at its start, between cases and at
its end, in every process. Those timings are the runs' own evidence about the machine: a candidate whose
reference took 1.35× as long as the base's ran on a machine 35 % slower, whatever the code did.

``compare`` reads them before it judges any row:

- **steady**: no reference moved past the threshold, within either run or between them: rows are judged as
  they are;
- **moved between the runs, steady within each**: a row on the same side of the ridge as the reference (the
  reference matmul is compute-bound, so a compute-bound row) is corrected by the reference's ratio (candidate
  over base, medians of every timing of each run). A row need not follow the reference one for one: between
  two runs of unchanged code a compute-bound row's ratio was the reference's raised to an elasticity β from
  about 0.6 to 2 in the stored pairs, and from 0 to 2.6 in a later sitting
  (docs/findings/gate.md#how-far-a-row-follows-the-reference). So the row's interval is
  divided by ``factor ** β`` at both ends of :data:`TRACKING_BAND` and the verdict is judged on the union of
  the two intervals, widened by the reference's own movement within the runs: ``slower`` only if the row is
  slower whichever way it tracked. Where the two ends disagree and one of them clears the threshold (slower
  had the row followed the reference fully, the same had it followed it less), the machine, not the code,
  leaves the row open: it is ``cannot judge``, never ``~``. A row on the other side of the ridge
  (memory-bound) is not corrected: a slower core says little about a busier memory bus, and the reverse;
- **moved within a run** (start and end of a run, or its processes, disagree by more than the threshold):
  no one factor describes the run, so no row is corrected.

A row that cannot be corrected while the machine moved is :attr:`Unjudged.CANNOT_JUDGE`, never faster, slower or
the same: a regression hidden by a faster machine reads as ``same`` as easily as noise reads as ``slower``.
A run that recorded no reference timings gives no evidence; its rows are judged as before and the comparison
says the machine was not watched.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mhabench.analysis.estimate import is_ok, key_of
from mhabench.analysis.verdict import Change, Unjudged, judge_change
from mhabench.measure.drift import reference_intensity
from mhabench.results import store
from mhabench.results.columns import ARITHMETIC_INTENSITY, MEASURED_INTENSITY, PEAK_GBPS, PEAK_TFLOPS, ROOFLINE_BOUND

Record = dict[str, Any]

TRACKING_BAND = (0.5, 1.0)
"""The elasticities β a corrected row's speed may follow the reference with (row ratio = reference ratio ** β):
from a low quantile of the rows of unchanged code that moved between two runs (``docs/findings/gate/
elasticity.py``, docs/findings/gate.md#how-far-a-row-follows-the-reference) up to one for one."""


class RowMachine(str, enum.Enum):
    """What the machine's movement did to one compared row, by code (the ``machine`` column; empty when it did
    nothing): corrected by the reference; corrected, but the verdict hangs on how far the row follows the
    reference (``tracking``); or why not corrected: the machine moved within a run, the row lies on the other side
    of the ridge from the reference, or its bound is unknown. ``mhabench.views.machine`` words them."""

    CORRECTED = "corrected"
    TRACKING = "tracking"
    MOVED_WITHIN = "moved_within"
    OTHER_BOUND = "other_bound"
    BOUND_UNKNOWN = "bound_unknown"

    __str__ = str.__str__


@dataclasses.dataclass(frozen=True)
class ReferenceTimings:
    """Every reference timing of one run (all its processes) and the device it ran on."""

    reference_ms: tuple[float, ...]
    device_type: str
    workload: str = ""

    @property
    def level_ms(self) -> float:
        """The run's typical reference time: the median of its timings."""
        return float(np.median(self.reference_ms))

    @property
    def within(self) -> float:
        """How far the reference moved inside the run: slowest over fastest timing, minus 1 (0 for one timing)."""
        return max(self.reference_ms) / min(self.reference_ms) - 1.0


@dataclasses.dataclass(frozen=True)
class MachineMove:
    """The reference timings of both runs, read against the comparison's threshold."""

    base: ReferenceTimings | None
    candidate: ReferenceTimings | None
    threshold: float

    @property
    def watched(self) -> bool:
        """Both runs recorded reference timings."""
        return self.base is not None and self.candidate is not None

    @property
    def factor(self) -> float:
        """Candidate's reference time over the base's (> 1: the candidate's machine was slower); NaN unwatched."""
        if self.base is None or self.candidate is None:
            return math.nan
        return self.candidate.level_ms / self.base.level_ms

    @property
    def within(self) -> float:
        """The larger movement of the reference inside either run (0 unwatched)."""
        return max((side.within for side in (self.base, self.candidate) if side is not None), default=0.0)

    @property
    def moved_between(self) -> bool:
        return self.watched and abs(math.log(self.factor)) > math.log1p(self.threshold)

    @property
    def moved_within(self) -> bool:
        return self.within > self.threshold

    @property
    def moved(self) -> bool:
        """The machine moved past the threshold between the runs or within one of them."""
        return self.moved_between or self.moved_within

    @property
    def reference_intensity(self) -> float:
        side = self.base or self.candidate
        return reference_intensity(side.device_type) if side is not None else math.nan


def reference_timings(run: store.Run) -> ReferenceTimings | None:
    """The run's reference timings: the manifest's own, or each replicate's; None when it recorded none."""
    manifest = run.manifest
    drifts = [manifest.drift] if manifest.drift else []
    drifts += [entry.get("drift") for entry in getattr(manifest, "replicated_from", None) or [] if entry.get("drift")]
    timings = [float(ms) for drift in drifts for ms in drift.get("reference_ms") or [] if _positive(ms)]
    if not timings:
        return None
    device_type = str(manifest.environment.get("device_kind") or "cpu")
    return ReferenceTimings(tuple(timings), device_type, str(drifts[0].get("workload") or ""))


def machine_move(base: store.Run, candidate: store.Run, threshold: float) -> MachineMove:
    return MachineMove(reference_timings(base), reference_timings(candidate), threshold)


def place_rows(rows: Sequence[Record], frame: pd.DataFrame, key: Sequence[str]) -> None:
    """Give each compared row the intensity (counted where the row counted it, else modelled) and the ridge of
    its case in ``frame``: where it lies against the roof decides whether the reference can correct it."""
    placements: dict[tuple[Any, ...], tuple[float, float, str]] = {}
    for record in frame.to_dict("records"):
        found = key_of(record, key)
        if found not in placements and is_ok(record):
            placements[found] = (_intensity(record), _ridge(record), str(record.get(ROOFLINE_BOUND) or ""))
    for row in rows:
        intensity, ridge, bound = placements.get(key_of(row, key), (math.nan, math.nan, ""))
        row.update(intensity=intensity, ridge=ridge, bound=bound)


def row_state(row: Mapping[str, Any], move: MachineMove) -> RowMachine | None:
    """What the machine's movement does to ``row``: nothing (None), corrected, or why it cannot be judged."""
    if not move.watched or not move.moved:
        return None
    if move.moved_within:
        return RowMachine.MOVED_WITHIN
    same_side = _same_side_as_reference(row, move.reference_intensity)
    if same_side is None:
        return RowMachine.BOUND_UNKNOWN
    return RowMachine.CORRECTED if same_side else RowMachine.OTHER_BOUND


def correct(rows: Sequence[Record], move: MachineMove) -> None:
    """Before any verdict: each comparable row's ``machine`` state, and a corrected row's interval the union of its
    intervals divided by the reference's factor raised to each end of :data:`TRACKING_BAND` (in place; the ratio
    is the band's middle, and ``tracked`` keeps the two intervals for :func:`unjudge`). Rows without a ratio (one
    side only, failed) are left as they are."""
    for row in rows:
        if row.get("verdict") is not None or not math.isfinite(float(row.get("ratio", math.nan))):
            continue
        state = row_state(row, move)
        row["machine"] = state.value if state is not None else ""
        if state is RowMachine.CORRECTED:
            row.update(tracked_interval(row["ratio"], row["ci_low"], row["ci_high"], move.factor))


def tracked_interval(ratio: float, ci_low: float, ci_high: float, factor: float) -> Record:
    """The row's ratio and interval corrected by ``factor ** β`` over :data:`TRACKING_BAND`: the union of the
    interval at each end, the ratio at the band's middle, and the two intervals themselves (``tracked``)."""
    ends = tuple((ci_low / factor**beta, ci_high / factor**beta) for beta in TRACKING_BAND)
    middle = sum(TRACKING_BAND) / 2
    return {
        "ratio": ratio / factor**middle,
        "ci_low": min(low for low, _ in ends),
        "ci_high": max(high for _, high in ends),
        "tracked": ends,
    }


def row_spread(row: Mapping[str, Any], move: MachineMove, between_process_spread: float) -> float:
    """The relative spread a row's interval is widened by before its verdict: a corrected row's also holds how far
    the reference moved inside the runs, which one factor per run cannot remove."""
    if row.get("machine") == RowMachine.CORRECTED:
        return max(between_process_spread, move.within)
    return between_process_spread


def unjudge(row: Record, threshold: float, spread: float) -> None:
    """After the verdict: a row the movement left uncorrectable is ``cannot judge``, whatever its interval said; so
    is a corrected row whose verdict depends on how closely it followed the reference (one end of the band past
    the threshold, the other not: :func:`band_decides`), whose state becomes ``tracking``."""
    if row.get("machine") == RowMachine.CORRECTED and band_decides(row, threshold, spread):
        row["machine"] = RowMachine.TRACKING.value
    if row.get("machine") and row["machine"] != RowMachine.CORRECTED:
        row["verdict"] = Unjudged.CANNOT_JUDGE.value


def band_decides(row: Mapping[str, Any], threshold: float, spread: float) -> bool:
    """Whether the ends of the tracking band give different verdicts and one of them is faster or slower: the
    row's change then hangs on the machine, not on its samples."""
    tracked = row.get("tracked")
    if not tracked or row.get("verdict") in (Change.FASTER, Change.SLOWER):
        return False
    verdicts = {judge_change(low, high, threshold, spread) for low, high in tracked}
    return len(verdicts) > 1 and bool(verdicts & {Change.FASTER, Change.SLOWER})


def _same_side_as_reference(row: Mapping[str, Any], reference: float) -> bool | None:
    """Whether the row and the reference lie on the same side of the row's ridge (None: the row cannot be placed).
    Without an intensity and a ridge the row's recorded ``roofline_bound`` places it."""
    intensity, ridge = float(row.get("intensity", math.nan)), float(row.get("ridge", math.nan))
    if math.isfinite(intensity) and math.isfinite(ridge) and ridge > 0:
        return (intensity >= ridge) == (reference >= ridge)
    bound = str(row.get("bound") or "")
    if bound in ("compute", "memory"):
        return bound == "compute"  # the reference is compute-bound on every device it runs on
    return None


def _intensity(record: Mapping[str, Any]) -> float:
    for column in (MEASURED_INTENSITY, ARITHMETIC_INTENSITY):
        value = _number(record.get(column))
        if math.isfinite(value) and value > 0:
            return value
    return math.nan


def _ridge(record: Mapping[str, Any]) -> float:
    """FLOP/B where the row's roof turns: peak TFLOP/s over peak GB/s."""
    tflops, gbps = _number(record.get(PEAK_TFLOPS)), _number(record.get(PEAK_GBPS))
    return tflops * 1e3 / gbps if math.isfinite(tflops) and math.isfinite(gbps) and gbps > 0 else math.nan


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _positive(value: Any) -> bool:
    number = _number(value)
    return math.isfinite(number) and number > 0
