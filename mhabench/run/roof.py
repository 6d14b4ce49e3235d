"""Keeps a run's measured roofs at or above the work its rows did, before each row is written.

The roofs of a CPU or an unknown GPU are probed once, before the first case (:mod:`mhabench.measure.peaks`). On a
busy machine that probe can come out slow, and a row then runs "above the roof": an efficiency over 100 % that
says nothing about the row. When a row lands above a probed roof, the roof of its dtype is probed again and the
larger figures kept (``re-probed``); a row still above it is the evidence, and the roof is raised to it (``raised
to row``). The row is written against the corrected roof and the rows after it are measured against it; rows
written before keep theirs (they were below it), and the read side puts every row of a run on its largest roof
(:mod:`mhabench.analysis.throughput`). A datasheet roof is never moved: a row above it is a cost-model question.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from mhabench.measure.peaks import DevicePeaks, RoofSource
from mhabench.measure.roofline import with_peaks, work_points
from mhabench.results.schema import ResultRow


@dataclasses.dataclass
class RoofCheck:
    """The run's current roof per dtype (shared with the runner, which measures the next cases against it)."""

    peaks: dict[str, DevicePeaks]
    probe: Callable[[str], DevicePeaks]
    """A fresh measurement of the roof of a dtype (not the per-process cached one)."""
    reprobed: set[str] = dataclasses.field(default_factory=set)
    """Dtypes probed again already: once per dtype and process, a second probe would only cost time."""

    def checked(self, row: ResultRow) -> ResultRow:
        """``row`` against its dtype's current roof (a row of a case measured before the roof moved included),
        corrected first where the row lies above it."""
        point, dtype = row.roofline, row.case.dtype
        if point is None or point.peak_tflops is None or dtype not in self.peaks:
            return row  # not placed: no roof known for the dtype it computes in
        if point.roof_source == RoofSource.DATASHEET:
            return row
        peaks, work = self.peaks[dtype], work_points(point, row.cost)
        if peaks.below(work) and dtype not in self.reprobed:
            self.reprobed.add(dtype)
            peaks = peaks.at_least(self.probe(dtype))
        peaks = peaks.raised_to(work)
        self.peaks[dtype] = peaks
        return dataclasses.replace(row, roofline=with_peaks(point, peaks))
