"""What two runs recorded about their machine, and what ``compare`` may conclude from it.

Every run times a fixed reference workload (:mod:`mhabench.measure.drift`) at its start, between cases and at
its end, in every process. Those timings are the runs' own evidence about the machine, and ``compare`` reads
them before it judges any row:

- **steady**: no reference moved past the threshold, within either run or between them: rows are judged as
  they are;
- **moved** within a run or between the runs: every timed row is :attr:`Unjudged.CANNOT_JUDGE`, never faster,
  slower or the same, its ``machine`` code saying which (:class:`RowMachine`). No row is corrected by the
  reference: between two runs of unchanged code a row's ratio followed the reference's anywhere from not at all
  to more than twice over (docs/findings/gate.md#how-far-a-row-follows-the-reference), so a corrected verdict
  would be the machine's as much as the code's. Counted work still gates (:mod:`.work_change`), and
  ``mhabench ab`` times two versions in the same rounds, where the machine cannot come between them.

A run that recorded no reference timings gives no evidence; its rows are judged as before and the comparison
says the machine was not watched.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mhabench.analysis.verdict import Unjudged
from mhabench.results import store

Record = dict[str, Any]


class RowMachine(str, enum.Enum):
    """Why a timed row of a comparison is ``cannot judge``, by code (the ``machine`` column; empty when the machine
    was steady or not watched): the reference moved within a run, or between the runs and steady within each.
    ``mhabench.views.machine`` words them."""

    MOVED_WITHIN = "moved_within"
    MOVED_BETWEEN = "moved_between"

    __str__ = str.__str__


@dataclasses.dataclass(frozen=True)
class ReferenceTimings:
    """Every reference timing of one run (all its processes) and what the workload was."""

    reference_ms: tuple[float, ...]
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
    def reason(self) -> RowMachine | None:
        """Why timed rows cannot be judged (within a run first: then no one level describes that run); None where
        the machine was steady or a run did not watch it."""
        if not self.watched:
            return None
        if self.moved_within:
            return RowMachine.MOVED_WITHIN
        return RowMachine.MOVED_BETWEEN if self.moved_between else None


def reference_timings(run: store.Run) -> ReferenceTimings | None:
    """The run's reference timings: the manifest's own, or each replicate's; None when it recorded none."""
    manifest = run.manifest
    drifts = [manifest.drift] if manifest.drift else []
    drifts += [entry.get("drift") for entry in getattr(manifest, "replicated_from", None) or [] if entry.get("drift")]
    timings = [float(ms) for drift in drifts for ms in drift.get("reference_ms") or [] if _positive(ms)]
    if not timings:
        return None
    return ReferenceTimings(tuple(timings), str(drifts[0].get("workload") or ""))


def machine_move(base: store.Run, candidate: store.Run, threshold: float) -> MachineMove:
    return MachineMove(reference_timings(base), reference_timings(candidate), threshold)


def unjudge(rows: Sequence[Record], move: MachineMove) -> None:
    """Before any verdict: where the machine moved, every timed row (a ratio and no verdict yet) is ``cannot
    judge`` with the reason's code in ``machine`` (empty where it did not move); rows without a ratio (one side
    only, failed) are left as they are. The row's ratio and interval stay as measured."""
    reason = move.reason
    for row in rows:
        if row.get("verdict") is not None or not math.isfinite(float(row.get("ratio", math.nan))):
            continue
        row["machine"] = reason.value if reason is not None else ""
        if reason is not None:
            row["verdict"] = Unjudged.CANNOT_JUDGE.value


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _positive(value: Any) -> bool:
    number = _number(value)
    return math.isfinite(number) and number > 0
