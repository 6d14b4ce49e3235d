"""Why: what a case's own columns say about its fastest rows, one small rule each.

- ``roofline``: where the row stands on the roofline the plot draws: executed FLOPs per byte and per second
  (:mod:`mhabench.analysis.executed`: useful FLOPs for a kernel that skips masked blocks), compute- or
  memory-bound by the ridge (peak FLOP/s ÷ bandwidth) and how far from the roof; under ``LOW_EFFICIENCY``
  it is far from both, and is called bound by neither; bytes counted from the ops that ran or the cost
  model's (no run records hardware-counter traffic yet); and the SDPA backend that ran.
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

from mhabench.analysis.advice import wording
from mhabench.analysis.advice.cases import MeasuredCase, Row
from mhabench.analysis.advice.pick import Pick
from mhabench.analysis.advice.thresholds import HOST_OVER_DEVICE, HOST_US_PER_OP, LAUNCH_BOUND_SHARE, LOW_EFFICIENCY
from mhabench.analysis.advice.wording import WHY, Statement
from mhabench.analysis.estimate import is_ok
from mhabench.analysis.executed import COUNTED, EXECUTED_INTENSITY, HARDWARE, executed
from mhabench.analysis.throughput import (
    EXECUTED_OVER_USEFUL,
    USEFUL_EFFICIENCY,
    USEFUL_INTENSITY,
    USEFUL_TFLOPS,
    as_in_table,
    throughput,
)
from mhabench.errors import UnknownImplementationError
from mhabench.impls import get_spec
from mhabench.measure.peaks import DevicePeaks
from mhabench.pattern import AttentionPattern
from mhabench.results.cells import number, text
from mhabench.results.columns import (
    ATTN_BYTES,
    BATCH,
    CAUSAL,
    D_MODEL,
    DTYPE,
    ERROR,
    HEAD_DIM,
    HEADS,
    HOST_LATENCY_MS,
    IMPL,
    KERNELS_PER_CALL,
    KV_HEADS,
    LATENCY_MS,
    LENGTHS,
    MASK,
    MODE,
    OPS_PER_CALL,
    PEAK_GBPS,
    PEAK_MEMORY_BYTES,
    PEAK_TFLOPS,
    PHASE,
    SCENARIO,
    SDPA_BACKEND,
    SEQ_LEN,
    SKIPS_MASKED_WORK,
    STATUS,
    WINDOW,
    flag,
)
from mhabench.results.schema import RowStatus
from mhabench.scenario.cases import Case as ShapeCase
from mhabench.scenario.config import DTYPES

DID_NOT_FIT = (RowStatus.SKIPPED, RowStatus.OOM)
INTENSITY_WORDS = {
    "hardware": "FLOPs and DRAM bytes from the hardware counters",
    "counted": "bytes counted from the ops that ran",
    "model": "bytes from the cost model",
}
"""How a sentence names each ``intensity_source`` (issue 25: an ncu figure is not the cost model's)."""
ROOFLINE, SCORES, LAUNCH, MEMORY, DID_NOT_FIT_RULE = "roofline", "scores", "launch", "memory", "did_not_fit"
"""The rule names of the why statements (``Statement.rule``), which the views rank by."""


def why(one: Pick, environment: Mapping[str, Any]) -> list[Statement]:
    """Every why statement of one case: the fastest row and the runner-up first, then launches and memory."""
    case = one.case
    compared = [impl for impl in (*one.impls[:1], one.runner_up) if impl]
    kind = str(environment.get("device_kind") or "")
    l2_bytes = environment.get("l2_cache_bytes")
    found = [roofline(case, impl) for impl in compared]
    found += [scores(case, impl, l2_bytes) for impl in compared]
    found += [launch(case, str(row[IMPL]), kind) for row in case.rows if is_ok(row)]
    found += [memory(case, compared[0], compared[1]) if len(compared) == 2 else None, did_not_fit(case)]
    return [statement for statement in found if statement is not None]


def _statement(case: MeasuredCase, rule: str, sentence: str, figures: Mapping[str, Any], impls: list[str]) -> Statement:
    return Statement(
        WHY, rule, case.group, case.label, f"{case.label}: {sentence}", figures, tuple(map(case.ref, impls))
    )


@dataclasses.dataclass(frozen=True)
class Position:
    """A row's useful work against the roof — the results table's FLOP/B, useful TFLOP/s and roofline eff.
    (:mod:`mhabench.analysis.throughput`), so advise quotes the numbers the table shows — and where the work it
    executed stood (:mod:`mhabench.analysis.executed`): its intensity, its source, the executed over useful FLOPs."""

    intensity: float
    """Useful FLOPs over the model's minimal bytes."""
    rate_tflops: float
    """Useful TFLOP/s."""
    peaks: DevicePeaks
    executed_intensity: float | None = None
    executed_over_useful: float | None = None
    source: str = "model"
    """Where the executed intensity comes from, as ``intensity_source`` names it: hardware, counted or model."""
    skips_masked_work: bool = False

    @property
    def attainable_tflops(self) -> float:
        return self.peaks.attainable_tflops(self.intensity)

    @property
    def efficiency(self) -> float:
        return self.rate_tflops / self.attainable_tflops

    @property
    def far_from_roof(self) -> bool:
        """Under ``LOW_EFFICIENCY`` as printed: compared in tenths of a percent, so 24.96 % (shown "25.0%") is not."""
        return round(1000 * self.efficiency) < round(1000 * LOW_EFFICIENCY)


def position(row: Row) -> Position | None:
    """The row's useful point against its device's peaks, with its executed one; None without peaks or figures."""
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
    source = "hardware" if done[HARDWARE] else "counted" if done[COUNTED] else "model"
    return Position(
        intensity,
        rate,
        DevicePeaks(peak_tflops, peak_gbps, ""),
        number(done, EXECUTED_INTENSITY),
        number(useful, EXECUTED_OVER_USEFUL),
        source,
        bool(done[SKIPS_MASKED_WORK]),
    )


def roofline(case: MeasuredCase, impl: str) -> Statement | None:
    point = position(case.row(impl) or {})
    if point is None:
        return None
    ridge, bound = point.peaks.ridge_flops_per_byte, point.peaks.bound(point.intensity)
    place = (
        f"its useful work at the model's minimal traffic, {as_in_table(point.intensity, USEFUL_INTENSITY)} FLOP/B, "
        f"lies "
        f"{'below' if bound == 'memory' else 'above'} the ridge at {ridge:.3g} FLOP/B"
    )
    reached = (
        f"{as_in_table(point.efficiency, USEFUL_EFFICIENCY)} of the attainable {point.attainable_tflops:.3g} TFLOP/s "
        f"({as_in_table(point.rate_tflops, USEFUL_TFLOPS)} useful TFLOP/s)"
    )
    if point.efficiency > 1:
        sentence = (
            f"{wording.impl(impl)} is {bound}-bound by its intensity: {place}; its "
            f"{as_in_table(point.rate_tflops, USEFUL_TFLOPS)} useful TFLOP/s are above the attainable "
            f"{point.attainable_tflops:.3g} TFLOP/s recorded for it, a roof below the work, so no efficiency is "
            "quoted"
        )
    elif point.far_from_roof:
        sentence = (
            f"{wording.impl(impl)} is far from both roofs: {place}, but it reaches only {reached}, under "
            f"{wording.percent(LOW_EFFICIENCY)}: the layout (small GEMMs, extra passes) or the host sets its time, "
            f"not {'bandwidth' if bound == 'memory' else 'compute'}"
        )
    else:
        sentence = f"{wording.impl(impl)} is {bound}-bound: {place}, and it reaches {reached}"
    sentence += _executed_clause(point)
    backend = text(case.row(impl) or {}, SDPA_BACKEND)
    sentence += f"; it ran SDPA's {backend} backend." if backend else "."
    figures = {
        "bound": bound,
        "intensity_flop_per_byte": point.intensity,
        "useful_tflops": point.rate_tflops,
        "efficiency": point.efficiency if point.efficiency <= 1 else None,
        "roof_below_work": point.efficiency > 1,
        "attainable_tflops": point.attainable_tflops,
        "ridge_flop_per_byte": ridge,
        "executed_over_useful": point.executed_over_useful,
        "executed_intensity_flop_per_byte": point.executed_intensity,
        "intensity_source": point.source,
        "skips_masked_work": point.skips_masked_work,
        "sdpa_backend": backend,
    }
    return _statement(case, ROOFLINE, sentence, figures, [impl])


def _executed_clause(point: Position) -> str:
    """``; it executed 5.67× the useful FLOPs, at 12.7 FLOP/B (all FLOPs executed; FLOPs and DRAM bytes from the
    hardware counters)``: the executed work, named by its source (issue 25: an ncu figure is not the model's)."""
    if point.executed_over_useful is None or point.executed_intensity is None:
        return ""
    flops = "useful FLOPs, masked blocks skipped" if point.skips_masked_work else "all FLOPs executed"
    return (
        f"; it executed {as_in_table(point.executed_over_useful, EXECUTED_OVER_USEFUL)}× the useful FLOPs, "
        f"at {point.executed_intensity:.3g} FLOP/B "
        f"({flops}; {INTENSITY_WORDS[point.source]})"
    )


def row_case(row: Row) -> ShapeCase | None:
    """The case a row ran, rebuilt from its shape columns (no bias, seed 0: neither changes a cost); None where the
    row lacks a shape field, has an unknown dtype or ran documents (their lengths are a label, not the rows)."""
    shape = [number(row, name) for name in (BATCH, SEQ_LEN, D_MODEL, HEADS)]
    if text(row, DTYPE) not in DTYPES or None in shape or text(row, LENGTHS) not in ("", "none"):
        return None  # documents: their lengths are a label in the row, not the rows the kernel ran
    batch, seq_len, d_model, heads = (int(cell or 0) for cell in shape)
    mask = text(row, MASK) or ("causal" if flag(row.get(CAUSAL)) is True else "none")
    return ShapeCase(
        scenario=text(row, SCENARIO),
        batch=batch,
        seq_len=seq_len,
        d_model=d_model,
        heads=heads,
        kv_heads=int(number(row, KV_HEADS) or heads),
        head_dim=int(number(row, HEAD_DIM) or d_model // heads),  # Gemma 2, Qwen3: heads wider than d_model / heads
        bias=False,
        dtype=text(row, DTYPE),
        seed=0,
        pattern=AttentionPattern(mask=mask, window=int(number(row, WINDOW) or 0) or None),  # type: ignore[arg-type]
        mode=text(row, MODE) or "forward",
        phase=text(row, PHASE) or "prefill",
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
    if l2 is None:
        cache = "against a cache of unknown size (the manifest records none for this device)"
    elif matrix > l2:
        cache = f"{matrix / l2:.3g}× the {wording.size(l2)} L2, so it goes through device memory"
    else:
        cache = f"within the {wording.size(l2)} L2"
    sentence = (
        f"{wording.impl(impl)} materializes the attention scores: {wording.size(matrix)} written and read back "
        f"per call (b·h·n·L elements, cost model), {cache}."
    )
    figures = {"score_bytes": matrix, "attn_bytes": number(row, ATTN_BYTES), "l2_cache_bytes": l2}
    return _statement(case, SCORES, sentence, figures, [impl])


def launch(case: MeasuredCase, impl: str, device_kind: str) -> Statement | None:
    """Launch-bound only far from the roofs: a row near one is limited by the device whatever the host does.
    CPU: its dispatched ops at ``HOST_US_PER_OP`` each are at least ``LAUNCH_BOUND_SHARE`` of its latency. CUDA,
    where launches overlap device work so an op count says nothing: one synchronous call's host time is at least
    ``HOST_OVER_DEVICE`` × its device time, on a row known to be far from its roof."""
    row = case.row(impl) or {}
    latency_ms, point = number(row, LATENCY_MS), position(row)
    known_far = point is not None and point.far_from_roof
    if not latency_ms or (point is not None and not known_far) or (device_kind == "cuda" and not known_far):
        return None
    ops, host_ms, kernels = number(row, OPS_PER_CALL), number(row, HOST_LATENCY_MS), number(row, KERNELS_PER_CALL)
    per_op_us = HOST_US_PER_OP.get(device_kind)
    share = ops * per_op_us / (latency_ms * 1e3) if ops and per_op_us else None
    host_ratio = host_ms / latency_ms if host_ms else None
    if device_kind == "cuda" and host_ratio is not None and host_ratio >= HOST_OVER_DEVICE:
        reason = (
            f"one synchronous call takes {wording.milliseconds(host_ms or 0)} on the host against "
            f"{wording.milliseconds(latency_ms)} on the device ({host_ratio:.2g}×)"
        )
    elif share is not None and share >= LAUNCH_BOUND_SHARE:
        launched = f" launching {kernels:.0f} kernels" if kernels else ""
        reason = (
            f"its {ops:.0f} dispatched ops{launched}, at ≥ {per_op_us:g} µs of host time each, are at least "
            f"{wording.percent(min(share, 1.0))} of its {wording.milliseconds(latency_ms)}"
        )
    else:
        return None
    far = f", and it reaches {as_in_table(point.efficiency, USEFUL_EFFICIENCY)} of its roof" if point else ""
    sentence = (
        f"{wording.impl(impl)} is launch-bound: {reason}{far}. Fewer, larger ops would pay more than faster kernels."
    )
    figures = {
        "ops_per_call": ops,
        "kernels_per_call": kernels,
        "host_us_per_op": per_op_us,
        "host_share": share,
        "host_latency_ms": host_ms,
        "latency_ms": latency_ms,
        "efficiency": point.efficiency if point is not None else None,
    }
    return _statement(case, LAUNCH, sentence, figures, [impl])


def memory(case: MeasuredCase, first: str, runner_up: str) -> Statement | None:
    ours, theirs = (number(case.row(impl) or {}, PEAK_MEMORY_BYTES) for impl in (first, runner_up))
    if not ours or not theirs:
        return None
    ratio = theirs / ours
    relation = f"{ratio:.3g}× less" if ratio >= 1 else f"{1 / ratio:.3g}× more"
    sentence = (
        f"{wording.impl(first)} peaks at {wording.size(ours)} per call against {wording.impl(runner_up)}'s "
        f"{wording.size(theirs)}: {relation}."
    )
    figures = {"peak_memory_bytes": ours, "runner_up_peak_memory_bytes": theirs}
    return _statement(case, MEMORY, sentence, figures, [first, runner_up])


def did_not_fit(case: MeasuredCase) -> Statement | None:
    failed = [row for row in case.rows if text(row, STATUS) in DID_NOT_FIT]
    if not failed:
        return None
    said = "; ".join(
        f"{wording.impl(str(row[IMPL]))} {text(row, STATUS)} ({text(row, ERROR) or 'no reason'})" for row in failed
    )
    figures = {"statuses": [text(row, STATUS) for row in failed]}
    return _statement(
        case, DID_NOT_FIT_RULE, f"did not fit in memory: {said}.", figures, [str(row[IMPL]) for row in failed]
    )
