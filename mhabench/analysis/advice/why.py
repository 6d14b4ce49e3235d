"""Why: what a case's own columns say about its fastest rows, one small rule each.

- where the row stands on the roofline the plot draws (:class:`Why`): useful and executed FLOPs per byte
  and per second (:mod:`mhabench.analysis.executed`), compute- or memory-bound by the ridge and how far from
  the roof; the run's record keeps it per row (``ImplAnswer.why``), and the views say it (rule ``roofline``).
- ``scores``: a row whose implementation's cost model materializes the b·h·n·L score matrix
  (``CostModel.materializes_scores``); its size against the device's L2.
- ``launch``: launch-bound, only far from the roofs: CPU by ``LAUNCH_BOUND_SHARE`` of host dispatch, CUDA
  (launches overlap device work) by ``HOST_OVER_DEVICE``.
- ``memory``: the peak memory of the fastest row against the runner-up's.
- ``did_not_fit``: the case's ``skipped`` and ``oom`` rows and their reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pandas as pd

from mhabench.analysis.advice.cases import MeasuredCase, Row
from mhabench.analysis.advice.pick import Pick
from mhabench.analysis.advice.thresholds import HOST_OVER_DEVICE, HOST_US_PER_OP, LAUNCH_BOUND_SHARE, LOW_EFFICIENCY
from mhabench.analysis.estimate import is_ok
from mhabench.analysis.executed import COUNTED, EXECUTED_INTENSITY, HARDWARE, executed
from mhabench.analysis.row_case import row_case
from mhabench.analysis.statement import WHY, Statement
from mhabench.analysis.throughput import EXECUTED_OVER_USEFUL, USEFUL_INTENSITY, USEFUL_TFLOPS, throughput
from mhabench.errors import UnknownImplementationError
from mhabench.impls import get_spec
from mhabench.measure.peaks import DevicePeaks
from mhabench.results.cells import number, text
from mhabench.results.columns import (
    ATTN_BYTES,
    ERROR,
    HOST_LATENCY_MS,
    IMPL,
    KERNELS_PER_CALL,
    LATENCY_MS,
    OPS_PER_CALL,
    PEAK_GBPS,
    PEAK_MEMORY_BYTES,
    PEAK_TFLOPS,
    SDPA_BACKEND,
    SKIPS_MASKED_WORK,
    STATUS,
)
from mhabench.results.schema import RowStatus

DID_NOT_FIT = (RowStatus.SKIPPED, RowStatus.OOM)
ROOFLINE, SCORES, LAUNCH, MEMORY, DID_NOT_FIT_RULE = "roofline", "scores", "launch", "memory", "did_not_fit"
"""The rule names of the why statements (``Statement.rule``), which the views rank by."""


def why(one: Pick, environment: Mapping[str, Any]) -> list[Statement]:
    """Every why statement of one case: the fastest row and the runner-up first, then launches and memory."""
    case = one.case
    compared = [impl for impl in (*one.impls[:1], one.runner_up) if impl]
    kind = str(environment.get("device_kind") or "")
    l2_bytes = environment.get("l2_cache_bytes")
    found = [scores(case, impl, l2_bytes) for impl in compared]
    found += [launch(case, str(row[IMPL]), kind) for row in case.rows if is_ok(row)]
    found += [memory(case, compared[0], compared[1]) if len(compared) == 2 else None, did_not_fit(case)]
    return [statement for statement in found if statement is not None]


def _statement(case: MeasuredCase, rule: str, figures: Mapping[str, Any], impl: str) -> Statement:
    return Statement(WHY, rule, case.group, case.label, {"impl": impl, **figures})


@dataclasses.dataclass(frozen=True)
class Why:
    """Where a row stands against its roof. ``efficiency`` is None where the row's rate is above its roof (a roof
    below the work: a figure no reason may cite, ``roof_below_work`` says so)."""

    bound: str
    intensity_flop_per_byte: float
    useful_tflops: float
    attainable_tflops: float
    efficiency: float | None
    roof_below_work: bool
    far_from_roof: bool
    """Under ``LOW_EFFICIENCY`` of its roof: neither bandwidth nor compute limits it (the layout or the host)."""
    executed_over_useful: float | None
    bytes_source: str
    """Where the executed intensity's bytes come from: ``hardware``, ``counted`` or ``model``."""
    ridge_flop_per_byte: float
    executed_intensity_flop_per_byte: float | None
    skips_masked_work: bool
    sdpa_backend: str
    """The SDPA backend that ran ("" where none did or none was recorded)."""


def why_of(row: Row) -> Why | None:
    """The row's useful point against its device's peaks, with its executed one — the results table's FLOP/B,
    useful TFLOP/s and roofline eff., so advise quotes the numbers the table shows; None without peaks or figures."""
    peak_tflops, peak_gbps = number(row, PEAK_TFLOPS), number(row, PEAK_GBPS)
    if not (peak_tflops and peak_gbps):
        return None
    if USEFUL_TFLOPS in row and HARDWARE in row:  # computed once for the run (advice.cases.cases_of)
        useful = done = row
    else:
        frame = pd.DataFrame([dict(row)])
        useful, done = throughput(frame).iloc[0], executed(frame).iloc[0]
    intensity, rate = number(useful, USEFUL_INTENSITY), number(useful, USEFUL_TFLOPS)
    if not (intensity and rate):
        return None
    peaks = DevicePeaks(peak_tflops, peak_gbps, "")
    attainable = peaks.attainable_tflops(intensity)
    efficiency = rate / attainable
    return Why(
        bound=peaks.bound(intensity),
        intensity_flop_per_byte=intensity,
        useful_tflops=rate,
        attainable_tflops=attainable,
        efficiency=None if efficiency > 1 else efficiency,
        roof_below_work=efficiency > 1,
        # compared as printed, in tenths of a percent: 24.96 % (shown "25.0%") is not far
        far_from_roof=round(1000 * efficiency) < round(1000 * LOW_EFFICIENCY),
        executed_over_useful=number(useful, EXECUTED_OVER_USEFUL),
        bytes_source="hardware" if done[HARDWARE] else "counted" if done[COUNTED] else "model",
        ridge_flop_per_byte=peaks.ridge_flops_per_byte,
        executed_intensity_flop_per_byte=number(done, EXECUTED_INTENSITY),
        skips_masked_work=bool(done[SKIPS_MASKED_WORK]),
        sdpa_backend=text(row, SDPA_BACKEND),
    )


def score_bytes(row: Row) -> float | None:
    """Bytes of the b·h·n·L score matrix of the row's workload (decode: one query against seq_len + 1 keys);
    None where :func:`row_case` cannot rebuild its case."""
    shaped = row_case(row)
    if shaped is None:
        return None
    load = shaped.workload()
    return float(load.score_elements * load.element_bytes)


def materializes_scores(impl: str) -> bool:
    """Whether the implementation's cost model writes and reads back the score matrix; False for one this
    version does not know (a row of an older run)."""
    try:
        model = get_spec(impl).cost
    except UnknownImplementationError:
        return False
    return model is not None and model.materializes_scores


def scores(case: MeasuredCase, impl: str, l2_bytes: Any) -> Statement | None:
    row = case.row(impl) or {}
    matrix = score_bytes(row)
    if matrix is None or not materializes_scores(impl):
        return None
    l2 = float(l2_bytes) if isinstance(l2_bytes, int | float) and l2_bytes > 0 else None
    figures = {"score_bytes": matrix, "attn_bytes": number(row, ATTN_BYTES), "l2_cache_bytes": l2}
    return _statement(case, SCORES, figures, impl)


def launch(case: MeasuredCase, impl: str, device_kind: str) -> Statement | None:
    """Launch-bound only far from the roofs: a row near one is limited by the device whatever the host does.
    CPU: its dispatched ops at ``HOST_US_PER_OP`` each are at least ``LAUNCH_BOUND_SHARE`` of its latency. CUDA,
    where launches overlap device work so an op count says nothing: one synchronous call's host time is at least
    ``HOST_OVER_DEVICE`` × its device time, on a row known to be far from its roof."""
    row = case.row(impl) or {}
    latency_ms, point = number(row, LATENCY_MS), why_of(row)
    known_far = point is not None and point.far_from_roof
    if not latency_ms or (point is not None and not known_far) or (device_kind == "cuda" and not known_far):
        return None
    ops, host_ms, kernels = number(row, OPS_PER_CALL), number(row, HOST_LATENCY_MS), number(row, KERNELS_PER_CALL)
    per_op_us = HOST_US_PER_OP.get(device_kind)
    share = ops * per_op_us / (latency_ms * 1e3) if ops and per_op_us else None
    host_ratio = host_ms / latency_ms if host_ms else None
    if device_kind == "cuda" and host_ratio is not None and host_ratio >= HOST_OVER_DEVICE:
        pace = "host_over_device"
    elif share is not None and share >= LAUNCH_BOUND_SHARE:
        pace = "dispatch"
    else:
        return None
    figures = {
        "ops_per_call": ops,
        "kernels_per_call": kernels,
        "host_us_per_op": per_op_us,
        "host_share": share,
        "host_latency_ms": host_ms,
        "latency_ms": latency_ms,
        "efficiency": point.efficiency if point is not None else None,
        "host_over_device": host_ratio,
        "pace": pace,
    }
    return _statement(case, LAUNCH, figures, impl)


def memory(case: MeasuredCase, first: str, runner_up: str) -> Statement | None:
    ours, theirs = (number(case.row(impl) or {}, PEAK_MEMORY_BYTES) for impl in (first, runner_up))
    if not ours or not theirs:
        return None
    figures = {"runner_up": runner_up, "peak_memory_bytes": ours, "runner_up_peak_memory_bytes": theirs}
    return _statement(case, MEMORY, figures, first)


def did_not_fit(case: MeasuredCase) -> Statement | None:
    failed = [row for row in case.rows if text(row, STATUS) in DID_NOT_FIT]
    if not failed:
        return None
    figures = {
        "statuses": [text(row, STATUS) for row in failed],
        "failed": [{"impl": str(row[IMPL]), "status": text(row, STATUS), "error": text(row, ERROR)} for row in failed],
    }
    return _statement(case, DID_NOT_FIT_RULE, figures, str(failed[0][IMPL]))
