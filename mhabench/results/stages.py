"""A row's breakdown by stage of the layer: the group its columns live in and the records its JSON cell holds.

The breakdown (:mod:`mhabench.measure.stages`, docs/stages.md) has one record per stage, so a row keeps it as
one JSON cell, ``stage_breakdown``, a list of :class:`StageFigures` as dictionaries; ``top_stage`` and its share
sit beside it as plain columns for tables. A row of an older run, or one measured without a breakdown, has them
empty; ``mhabench explain`` then derives one from kernels.csv where the run profiled kernels.
"""

from __future__ import annotations

import dataclasses
import json
import math

from mhabench.results.column import column


@dataclasses.dataclass(frozen=True)
class StageFigures:
    """One stage of one call: measured time, FLOPs and bytes, the model's figures, and the op that cost most."""

    stage: str
    time_ms: float
    time_share: float
    """Of the profiled call's time (what no op covers, Python and dispatch, is in ``other``)."""
    flops: float | None
    """Matmul-class FLOPs that ran (CPU: from the op shapes; CUDA: the counters'); None where not counted."""
    bytes_moved: float | None
    """CPU: bytes the ops read and wrote by their shapes; CUDA: DRAM bytes the counters saw; None where not counted."""
    model_flops: float | None
    model_bytes: float | None
    ops: int
    """Ops (CPU) or kernels (CUDA) attributed to the stage."""
    top_op: str
    """The longest of them, with its shapes on the CPU (``aten::bmm [[64,1,64],[64,64,192]]``)."""
    top_op_count: int
    """How many of the stage's ops share ``top_op``'s name and shapes."""

    @property
    def flops_ratio(self) -> float | None:
        """Measured over modelled FLOPs (None where either is missing or the model prices none)."""
        return _ratio(self.flops, self.model_flops)

    @property
    def bytes_ratio(self) -> float | None:
        return _ratio(self.bytes_moved, self.model_bytes)


FIGURE_FIELDS = tuple(field.name for field in dataclasses.fields(StageFigures))


def _ratio(measured: float | None, model: float | None) -> float | None:
    if measured is None or model is None or not model or math.isnan(measured):
        return None
    return measured / model


@dataclasses.dataclass(frozen=True)
class StageBreakdown:
    """Where one call of the row went, stage by stage, against the cost model (a call of its own, after timing)."""

    stage_breakdown: str = column(
        "per stage of the layer (QKV projection, scores, mask/softmax, P·V, attention kernel, output projection, "
        "layout copies, other): time share, FLOPs and bytes that ran, the cost model's, the longest op; a JSON "
        "list (docs/stages.md), from one profiled call after the timing",
        role="measured",
        label="stages",
    )
    top_stage: str = column(
        "the stage with the largest share of the profiled call's time", role="measured", label="top stage"
    )
    top_stage_share: float = column(
        "top_stage's share of the profiled call's time", role="measured", unit="fraction", label="top stage share"
    )
    breakdown_source: str = column(
        "where the breakdown came from: profiler (CPU ops with their shapes), kernels (CUDA kernel durations), "
        "counters (CUDA kernels with Nsight Compute's FLOPs and DRAM bytes); otherwise why it is empty",
        role="identity",
        label="stages from",
    )


def breakdown_group(figures: list[StageFigures], source: str) -> StageBreakdown:
    """The row's group for a breakdown (the JSON cell and its top stage)."""
    top = max(figures, key=lambda figure: figure.time_ms, default=None)
    return StageBreakdown(
        stage_breakdown=json.dumps([_record(figure) for figure in figures], separators=(",", ":")),
        top_stage=None if top is None else top.stage,
        top_stage_share=None if top is None else top.time_share,
        breakdown_source=source,
    )


def _record(figure: StageFigures) -> dict[str, object]:
    """The figure's fields, in order: what ``dataclasses.asdict`` gives for its flat values, without its deep copy of
    each one (every row of a run writes one per stage)."""
    return {name: getattr(figure, name) for name in FIGURE_FIELDS}


def read_breakdown(cell: object) -> list[StageFigures]:
    """The records of a ``stage_breakdown`` cell; [] for an empty or unreadable one (an older run)."""
    if not isinstance(cell, str) or not cell.strip():
        return []
    try:
        records = json.loads(cell)
        return [StageFigures(**record) for record in records]
    except (ValueError, TypeError):
        return []
