"""Why: what a case's own columns say about its fastest rows, one small rule each.

- ``roofline``: compute- or memory-bound (the row's ``roofline_bound``: intensity above or below the
  ridge, peak FLOP/s ÷ bandwidth) and how far from the roof (``roofline_efficiency``; far below both
  under ``LOW_EFFICIENCY``), at the intensity the roofline used, saying where it came from: counted
  from the ops that ran, or the cost model's (no run records hardware-counter traffic yet); and the
  SDPA backend that ran.
- ``scores``: a row whose modelled attention traffic includes at least one write and one read of the
  b·h·n·L score matrix beyond Q, K, V and the output materializes it; its size against the device's L2.
- ``launch``: launch-bound, by ``LAUNCH_BOUND_SHARE`` of host dispatch or ``HOST_OVER_DEVICE``.
- ``memory``: the peak memory of the fastest row against the runner-up's.
- ``did_not_fit``: the case's ``skipped`` and ``oom`` rows and their reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mhabench.analysis.advice import wording
from mhabench.analysis.advice.cases import Case, Row
from mhabench.analysis.advice.cells import number, text
from mhabench.analysis.advice.pick import Pick
from mhabench.analysis.advice.statement import WHY, Statement
from mhabench.analysis.advice.thresholds import HOST_OVER_DEVICE, HOST_US_PER_OP, LAUNCH_BOUND_SHARE, LOW_EFFICIENCY
from mhabench.analysis.speedup import is_ok
from mhabench.results.schema import (
    ARITHMETIC_INTENSITY,
    ATTAINABLE_TFLOPS,
    ATTN_BYTES,
    BATCH,
    DTYPE,
    ERROR,
    HEAD_DIM,
    HEADS,
    HOST_LATENCY_MS,
    IMPL,
    INTENSITY_SOURCE,
    KERNELS_PER_CALL,
    KV_HEADS,
    LATENCY_MS,
    MEASURED_INTENSITY,
    OPS_PER_CALL,
    PEAK_GBPS,
    PEAK_MEMORY_BYTES,
    PEAK_TFLOPS,
    PHASE,
    ROOFLINE_BOUND,
    ROOFLINE_EFFICIENCY,
    SDPA_BACKEND,
    SEQ_LEN,
    STATUS,
)

ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
DID_NOT_FIT = ("skipped", "oom")


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


def _statement(case: Case, rule: str, sentence: str, figures: Mapping[str, Any], impls: list[str]) -> Statement:
    return Statement(
        WHY, rule, case.group, case.label, f"{case.label}: {sentence}", figures, tuple(map(case.ref, impls))
    )


def intensity(row: Row) -> tuple[float, str] | None:
    """The intensity the row's roofline used and where it came from: ``counted`` or ``cost model``."""
    if text(row, INTENSITY_SOURCE) == "measured" and number(row, MEASURED_INTENSITY) is not None:
        return float(number(row, MEASURED_INTENSITY) or 0), "counted from the ops that ran"
    value = number(row, ARITHMETIC_INTENSITY)
    return (value, "cost model") if value is not None else None


def roofline(case: Case, impl: str) -> Statement | None:
    row = case.row(impl) or {}
    bound, efficiency, attainable = (
        text(row, ROOFLINE_BOUND),
        number(row, ROOFLINE_EFFICIENCY),
        number(row, ATTAINABLE_TFLOPS),
    )
    point, peak_tflops, peak_gbps = intensity(row), number(row, PEAK_TFLOPS), number(row, PEAK_GBPS)
    if not (bound and efficiency is not None and attainable and point and peak_tflops and peak_gbps):
        return None
    ridge = peak_tflops * 1e3 / peak_gbps  # TFLOP/s over GB/s: FLOP per byte
    value, source = point
    sentence = (
        f"{wording.impl(impl)} is {bound}-bound: its {value:.3g} FLOP/B ({source}) lies "
        f"{'below' if bound == 'memory' else 'above'} the ridge at {ridge:.3g} FLOP/B, and it reaches "
        f"{wording.percent(efficiency)} of the attainable {attainable:.3g} TFLOP/s"
    )
    if efficiency < LOW_EFFICIENCY:
        sentence += (
            f"; under {wording.percent(LOW_EFFICIENCY)}, far below both roofs: neither bandwidth nor compute limits it"
        )
    backend = text(row, SDPA_BACKEND)
    sentence += f"; it ran SDPA's {backend} backend." if backend else "."
    figures = {
        "bound": bound,
        "intensity_flop_per_byte": value,
        "intensity_source": source,
        "ridge_flop_per_byte": ridge,
        "efficiency": efficiency,
        "attainable_tflops": attainable,
        "sdpa_backend": backend,
    }
    return _statement(case, "roofline", sentence, figures, [impl])


def score_bytes(row: Row) -> float | None:
    """Bytes of the b·h·n·L score matrix (decode: one query against seq_len + 1 keys); None for an unknown dtype."""
    element = ELEMENT_BYTES.get(text(row, DTYPE))
    cells = [number(row, name) for name in (BATCH, HEADS, SEQ_LEN)]
    if element is None or None in cells:
        return None
    batch, heads, seq_len = (float(cell or 0) for cell in cells)
    queries, keys = (1.0, seq_len + 1) if text(row, PHASE) == "decode" else (seq_len, seq_len)
    return batch * heads * queries * keys * element


def _io_bytes(row: Row) -> float:
    """Q, K, V read and the output written once: what even a fused kernel moves."""
    element = ELEMENT_BYTES.get(text(row, DTYPE), 0)
    batch, heads, seq_len = (number(row, name) or 0 for name in (BATCH, HEADS, SEQ_LEN))
    kv_heads, head_dim = number(row, KV_HEADS) or heads, number(row, HEAD_DIM) or 0
    queries, keys = (1.0, seq_len + 1) if text(row, PHASE) == "decode" else (seq_len, seq_len)
    return element * batch * head_dim * (2 * heads * queries + 2 * kv_heads * keys)


def scores(case: Case, impl: str, l2_bytes: Any) -> Statement | None:
    row = case.row(impl) or {}
    matrix, attention = score_bytes(row), number(row, ATTN_BYTES)
    if matrix is None or attention is None or attention - _io_bytes(row) < 2 * matrix:
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
    figures = {"score_bytes": matrix, "attn_bytes": attention, "l2_cache_bytes": l2}
    return _statement(case, "scores", sentence, figures, [impl])


def launch(case: Case, impl: str, device_kind: str) -> Statement | None:
    row = case.row(impl) or {}
    ops, latency_ms = number(row, OPS_PER_CALL), number(row, LATENCY_MS)
    host_ms, kernels = number(row, HOST_LATENCY_MS), number(row, KERNELS_PER_CALL)
    per_op_us = HOST_US_PER_OP.get(device_kind)
    if not latency_ms:
        return None
    share = ops * per_op_us / (latency_ms * 1e3) if ops and per_op_us else None
    host_ratio = host_ms / latency_ms if host_ms else None
    parts = []
    if share is not None and share >= LAUNCH_BOUND_SHARE:
        launched = f" launching {kernels:.0f} kernels" if kernels else ""
        parts.append(
            f"its {ops:.0f} dispatched ops{launched}, at ≥ {per_op_us:g} µs of host time each, are at least "
            f"{wording.percent(min(share, 1.0))} of its {wording.milliseconds(latency_ms)}"
        )
    if host_ratio is not None and host_ratio >= HOST_OVER_DEVICE:
        parts.append(
            f"one synchronous call takes {wording.milliseconds(host_ms or 0)} on the host against "
            f"{wording.milliseconds(latency_ms)} on the device ({host_ratio:.2g}×)"
        )
    if not parts:
        return None
    sentence = (
        f"{wording.impl(impl)} is launch-bound: {'; '.join(parts)}. Fewer, larger ops would pay more than faster "
        "kernels."
    )
    figures = {
        "ops_per_call": ops,
        "kernels_per_call": kernels,
        "host_us_per_op": per_op_us,
        "host_share": share,
        "host_latency_ms": host_ms,
        "latency_ms": latency_ms,
    }
    return _statement(case, "launch", sentence, figures, [impl])


def memory(case: Case, first: str, runner_up: str) -> Statement | None:
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
    return _statement(case, "memory", sentence, figures, [first, runner_up])


def did_not_fit(case: Case) -> Statement | None:
    failed = [row for row in case.rows if text(row, STATUS) in DID_NOT_FIT]
    if not failed:
        return None
    said = "; ".join(
        f"{wording.impl(str(row[IMPL]))} {text(row, STATUS)} ({text(row, ERROR) or 'no reason'})" for row in failed
    )
    figures = {"statuses": [text(row, STATUS) for row in failed]}
    return _statement(
        case, "did_not_fit", f"did not fit in memory: {said}.", figures, [str(row[IMPL]) for row in failed]
    )
