"""Counted work between two runs: a gate no load on the machine can move.

Latency moves with whatever else the machine runs; the work a row counted does not. The FLOPs, bytes and ops
per call counted from the ops a CPU row dispatched, and the instruction counters of a GPU row (tensor and fp32
FLOPs, kernels per call, from Nsight Compute), are the same on an idle and on a loaded machine for the same
code on the same case. A change in them is a change in the code (or in the library under it), exactly: no
interval, no verdict by threshold on noise.

``compare`` reports every such change beside the timing verdict, and ``--fail-on-regression`` fails on a rise
above the threshold even where the time cannot be judged. DRAM bytes from the counters are left out: they depend
on what the caches held, which the machine's other work changes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mhabench.analysis.estimate import by_key, is_ok, key_of
from mhabench.results.columns import (
    FP32_FLOPS,
    KERNELS_PER_CALL,
    MEASURED_BYTES,
    MEASURED_FLOPS,
    OPS_PER_CALL,
    TENSOR_FLOPS,
)

COUNTED_WORK = (MEASURED_FLOPS, MEASURED_BYTES, OPS_PER_CALL, TENSOR_FLOPS, FP32_FLOPS, KERNELS_PER_CALL)
"""The counted columns compared between runs: counted from dispatched ops on every device, and the hardware
counters a GPU row with ``--counters hardware`` adds."""

Record = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class WorkChange:
    """One counted column of one row that differs between the runs: both values, exactly as counted."""

    column: str
    base: float
    candidate: float

    @property
    def relative(self) -> float:
        """candidate / base − 1 (inf for work counted where the base counted none)."""
        if self.base == 0:
            return math.inf if self.candidate > 0 else 0.0
        return self.candidate / self.base - 1.0


def changes(base: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]]) -> list[WorkChange]:
    """Every counted column both sides filled whose value differs (each side: the median over its ok processes,
    which count the same work; a side that did not count a column leaves it out)."""
    found = []
    for column in COUNTED_WORK:
        base_value, candidate_value = _counted(base, column), _counted(candidate, column)
        if math.isfinite(base_value) and math.isfinite(candidate_value) and base_value != candidate_value:
            found.append(WorkChange(column, base_value, candidate_value))
    return found


def annotate(rows: Sequence[Record], base: pd.DataFrame, candidate: pd.DataFrame, key: Sequence[str]) -> None:
    """Give each compared row its ``work_changes`` (a list of :class:`WorkChange`) and ``work_rise``, the largest
    relative rise among them (0 where none rose), in place."""
    base_groups, candidate_groups = (
        by_key(filter(is_ok, frame.to_dict("records")), key) for frame in (base, candidate)
    )
    for row in rows:
        found = key_of(row, key)
        moved = changes(base_groups.get(found, []), candidate_groups.get(found, []))
        row["work_changes"] = moved
        row["work_rise"] = max((change.relative for change in moved), default=0.0)


def rises(rows: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """The rows whose counted work rose by more than ``threshold`` in some column (what the work gate fails on)."""
    if "work_rise" not in rows:
        return rows.iloc[0:0]
    return rows[rows["work_rise"].astype(float) > threshold]


def _counted(records: Sequence[Mapping[str, Any]], column: str) -> float:
    values = [float(v) for v in (record.get(column) for record in records) if _finite(v)]
    return float(np.median(values)) if values else math.nan


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
