"""A timed row placed on the device's roofline: throughput from its measured median, against the peaks.

The arithmetic that turns a measured latency, the FLOPs and bytes of one call (counted from the
dispatched ops where they describe the call, else the implementation's cost model) and the device
peaks of :mod:`mhabench.measure.peaks` into the ``roofline`` group of a row. docs/measurement.md
("Roofline") says how to read it.
"""

from __future__ import annotations

import dataclasses

from mhabench.measure.peaks import DevicePeaks
from mhabench.results.gpu_groups import HardwareCounters
from mhabench.results.schema import Counted, LatencyStats, ModelledCost, Roofline


def roofline(
    query_tokens: int,
    cost: ModelledCost | None,
    counts: Counted | None,
    latency: LatencyStats,
    peaks: DevicePeaks,
    skips_masked_work: bool,
    hardware: HardwareCounters | None = None,
) -> Roofline:
    """Throughput from the measured median, placed by the hardware intensity where ncu measured one, else the
    counted intensity where it exists, else the model's."""
    latency_s = latency.latency_ms / 1e3
    base = Roofline(
        tokens_per_s=query_tokens / latency_s,
        peak_tflops=peaks.peak_tflops,
        peak_gbps=peaks.peak_gbps,
        roofline_source=peaks.source,
        roof_source=peaks.roof_source,
        skips_masked_work=skips_masked_work,
    )
    # counted where they describe the call; not when an opaque op (a custom kernel) hid part of it and the
    # implementation has a model (``counted`` then leaves the disagreement empty)
    hidden = counts is not None and cost is not None and counts.model_disagreement is None
    measured = hardware_cost(hardware)
    if measured is not None:
        flops, moved, source = *measured, "hardware"
    elif counts is not None and counts.measured_bytes and not hidden:
        flops, moved, source = counts.measured_flops, counts.measured_bytes, "measured"
    elif cost is not None:
        flops, moved, source = cost.flops, cost.bytes_moved, "modelled"
    else:
        return base
    intensity = flops / moved
    achieved_tflops = flops / latency_s / 1e12
    attainable = peaks.attainable_tflops(intensity)
    useful = cost.useful_flops / latency_s / 1e12 if cost is not None else None
    # a kernel that skips masked blocks never executes the full n² FLOPs: judged on the useful ones,
    # or a causal row would read up to 2× its real efficiency (above 1 on an H200); the hardware's FLOPs are
    # the executed ones already
    counts_skipped = skips_masked_work and useful is not None and source != "hardware"
    judged = useful if counts_skipped else achieved_tflops
    return dataclasses.replace(
        base,
        achieved_tflops=achieved_tflops,
        achieved_gbps=moved / latency_s / 1e9,
        roofline_bound=peaks.bound(intensity),
        attainable_tflops=attainable,
        roofline_efficiency=judged / attainable,
        intensity_source=source,
        achieved_useful_tflops=useful,
    )


def with_peaks(point: Roofline, peaks: DevicePeaks) -> Roofline:
    """``point`` placed against other roofs (a re-probed or raised one): its throughput and intensity unchanged."""
    moved = dataclasses.replace(
        point,
        peak_tflops=peaks.peak_tflops,
        peak_gbps=peaks.peak_gbps,
        roofline_source=peaks.source,
        roof_source=peaks.roof_source,
    )
    intensity, judged = executed_intensity(point), executed_tflops(point)
    if intensity is None or judged is None:
        return moved
    attainable = peaks.attainable_tflops(intensity)
    return dataclasses.replace(
        moved,
        roofline_bound=peaks.bound(intensity),
        attainable_tflops=attainable,
        roofline_efficiency=judged / attainable,
    )


def work_points(point: Roofline, cost: ModelledCost | None) -> list[tuple[float, float]]:
    """The (TFLOP/s, FLOP/B) points a row's efficiencies judge against its roof: the executed one (the stored
    ``roofline_efficiency``) and the useful work at the model's minimal traffic (:mod:`mhabench.analysis.throughput`).
    A roof below either is below work this row did."""
    points = []
    intensity, judged = executed_intensity(point), executed_tflops(point)
    if intensity and judged:
        points.append((judged, intensity))
    if cost is not None and point.achieved_useful_tflops and cost.useful_flops and cost.bytes_moved:
        points.append((point.achieved_useful_tflops, cost.useful_flops / cost.bytes_moved))
    return points


def executed_intensity(point: Roofline) -> float | None:
    """FLOPs per byte of the placed point (achieved TFLOP/s over achieved GB/s); None where it was not placed."""
    if not (point.achieved_tflops and point.achieved_gbps):
        return None
    return point.achieved_tflops * 1e3 / point.achieved_gbps


def executed_tflops(point: Roofline) -> float | None:
    """FLOP/s of what the kernels executed, the rate ``roofline_efficiency`` judges: the hardware's FLOPs where
    ncu counted them (executed ones already), the useful FLOPs where the kernel skips masked blocks (the counted
    and modelled FLOPs include the scores it never computed), every counted or modelled FLOP otherwise.
    :mod:`mhabench.analysis.executed` applies the same rule to a run's table; None for a skipping row with no
    useful-FLOP figure."""
    if point.intensity_source == "hardware" or not point.skips_masked_work:
        return point.achieved_tflops
    return point.achieved_useful_tflops


def hardware_cost(hardware: HardwareCounters | None) -> tuple[float, float] | None:
    """(FLOPs, DRAM bytes) of one call as the counters saw them, where both were measured and are positive."""
    if hardware is None or not hardware.hardware_intensity:
        return None
    flops = (hardware.tensor_flops or 0) + (hardware.fp32_flops or 0)
    moved = (hardware.dram_read_bytes or 0) + (hardware.dram_write_bytes or 0)
    return (flops, moved) if flops > 0 and moved > 0 else None


def group_peaks(one_device: DevicePeaks, ranks: int) -> DevicePeaks:
    """The roofs of the ``ranks`` devices one tensor-parallel layer runs on: ``ranks`` times one device's.

    The counted FLOPs and bytes of a rank describe its slice only, so a T > 1 row is placed by the
    cost model of the whole layer (its ``counted`` columns stay empty) against the group's roofs.
    """
    if ranks == 1:
        return one_device
    return DevicePeaks(
        one_device.peak_tflops * ranks, one_device.peak_gbps * ranks, f"{one_device.source}; × {ranks} ranks"
    )
