"""A row's breakdown by stage (docs/stages.md): profiled calls after the case's timing, or its counted kernels.

The calls are never timed ones: the case's rounds are over when they run. It costs one call per row on CUDA and on
the CPU one that nothing preempted (the case's rows' first calls in one session of the profiler), else two that agree
or the median of three
(:func:`mhabench.measure.stages.profile_cpu`)
(on the H100 GPU default sweep the 92 ok rows' medians add up to 5.3 s, run 20261126T070612Z-default-gpu), plus
the profiler's overhead. On the CPU it runs under torch's profiler with shapes; on CUDA under the profiler's
kernel trace (durations only) and, where ``counters: hardware`` profiled the row under Nsight Compute, again from
those kernels with their FLOPs and DRAM bytes (:func:`counters_breakdown`, which replaces the durations-only one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from mhabench.impls.registry import ImplSpec
from mhabench.measure import stages
from mhabench.results.stages import StageBreakdown, breakdown_group
from mhabench.scenario.cases import Case
from mhabench.scenario.config import DTYPES
from mhabench.stage_cost import StageCost, stage_costs
from mhabench.torch_errors import is_sticky_cuda_error

SLICE_ONLY = "not measured: this rank runs a slice of the layer"
TRAIN_STEP = "not measured: the stage rules read a forward call's order, and a train step interleaves its backward"


def model_stages(spec: ImplSpec, case: Case) -> dict[str, StageCost] | None:
    """The cost model's figures per stage for this case; None for an implementation without a model."""
    return stage_costs(spec.cost, case.workload()) if spec.cost else None


def profiled_breakdown(call: Callable[[], object], spec: ImplSpec, case: Case, device: torch.device) -> StageBreakdown:
    """One call of ``call`` profiled and attributed to stages; a failure leaves the group saying why, not the row."""
    if case.mode == "train":
        return StageBreakdown(breakdown_source=TRAIN_STEP)
    try:
        with torch.inference_mode():  # no warm-up call: the case's timing rounds have just run this one
            if device.type == "cuda":
                units, source, total_ms = stages.profile_cuda(call, device), "kernels", None
            else:
                units, total_ms = stages.profile_cpu(call, DTYPES[case.dtype].itemsize)
                source = "profiler"
    except Exception as exc:  # the timing succeeded, so a failure here is the profiler's, not the row's
        if is_sticky_cuda_error(exc):
            raise
        return StageBreakdown(breakdown_source=f"not measured: {type(exc).__name__}: {exc}"[:200])
    return breakdown_group(stages.breakdown(units, model_stages(spec, case), total_ms), source)


def profiled_breakdowns(
    calls: Sequence[tuple[Callable[[], object], ImplSpec]], case: Case, device: torch.device
) -> list[StageBreakdown]:
    """:func:`profiled_breakdown` of each (call, implementation) of one case. On the CPU their first profiled calls
    share one session of the profiler (:func:`mhabench.measure.stages.profile_cpu_each`); where that session fails,
    each call is profiled alone, so a failure lands on the row whose call raised it."""
    if case.mode == "train" or device.type != "cpu" or len(calls) < 2:
        return [profiled_breakdown(call, spec, case, device) for call, spec in calls]
    try:
        with torch.inference_mode():  # no warm-up call: the case's timing rounds have just run these
            profiled = stages.profile_cpu_each([call for call, _ in calls], DTYPES[case.dtype].itemsize)
    except Exception:
        return [profiled_breakdown(call, spec, case, device) for call, spec in calls]
    return [
        breakdown_group(stages.breakdown(units, model_stages(spec, case), total_ms), "profiler")
        for (units, total_ms), (_, spec) in zip(profiled, calls, strict=True)
    ]


def counters_breakdown(kernels: Sequence[Mapping[str, Any]], spec: ImplSpec, case: Case) -> StageBreakdown:
    """The breakdown from one row's profiled kernels (kernels.csv's records, in launch order) with their counters."""
    units = stages.kernel_units(sorted(kernels, key=lambda kernel: int(kernel["kernel"])))
    return breakdown_group(stages.breakdown(units, model_stages(spec, case)), "counters")
