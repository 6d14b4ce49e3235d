"""A timed row placed on its roofline, with what follows from its measurements once all are in.

Roofline work, not the case path: :func:`mhabench.run.case.run_case` calls :func:`finished` on each ok row after its
last stage (the hardware counters), so the placement reads every measured group the row will have.
"""

from __future__ import annotations

from mhabench.impls.registry import get_spec
from mhabench.impls.sdpa import kernel_skips_masked_work
from mhabench.measure.nvml import per_joule
from mhabench.measure.peaks import DevicePeaks
from mhabench.measure.roofline import executed_tflops, roofline
from mhabench.results.schema import ResultRow, Roofline
from mhabench.scenario.cases import Case


def finished(row: ResultRow, case: Case, peaks: DevicePeaks) -> ResultRow:
    """A timed row with what follows from its measurements, once all are in (its hardware counters too): its
    roofline group and its FLOPs and tokens per joule."""
    row = row.with_groups(placed(row, case, peaks))
    if row.energy is None or row.roofline is None or row.latency is None:
        return row
    tflops = executed_tflops(row.roofline)
    flops = tflops * 1e12 * row.latency.latency_ms / 1e3 if tflops is not None else None
    return row.with_groups(per_joule(row.energy, flops, case.workload().real_tokens))


def placed(row: ResultRow, case: Case, peaks: DevicePeaks) -> Roofline:
    """The roofline group of a timed row (throughput from its median latency), against the roof of the dtype
    its implementation computes in (``fused_fp8``: the fp8 tensor rate); throughput alone where that roof is
    unknown here."""
    assert row.latency is not None
    backend = row.dispatch.sdpa_backend if row.dispatch is not None else None
    pattern = case.pattern
    skips = pattern.needs_mask and kernel_skips_masked_work(backend or "", row.case.impl, dense_mask=not pattern.plain)
    compute_dtype = get_spec(row.case.impl).compute_dtype
    roof = peaks.for_compute(compute_dtype)
    tokens = case.workload().real_tokens
    if roof is None:
        source = f"{peaks.source}; no {compute_dtype} tensor rate known for this device"
        return Roofline(tokens_per_s=tokens / (row.latency.latency_ms / 1e3), roofline_source=source)
    return roofline(tokens, row.cost, row.counted, row.latency, roof, skips, row.hardware)
