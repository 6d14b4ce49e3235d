"""Device peaks for the roofline: a datasheet table for known GPUs, a measurement otherwise.

A GPU is matched by its exact model, not by a fragment: "H100 NVL", "H100 PCIe" and the SXM part
have different peaks, "GH200" is not an "H200", and an A100's bandwidth depends on its memory size
and form factor. Names are matched as whole words (so "H200" does not match inside "GH200") and the
longest matching pattern wins (so "H200 NVL" beats "H200").

A MIG slice (a name containing "MIG", a ``MIG-`` device in ``CUDA_VISIBLE_DEVICES``, or fewer
multiprocessors than the whole chip has) gets no datasheet figure: it owns a fraction of the chip's
compute and memory bandwidth that the datasheet does not state, so its peaks are measured.

fp32 matmuls run on the TF32 tensor cores when ``torch.backends.cuda.matmul.allow_tf32`` is on (or
``torch.get_float32_matmul_precision()`` is not "highest"), which moves the fp32 roof by about 7×;
the choice is read when the peaks are looked up and written into ``source``.

CPUs and unknown GPUs are measured: a large matmul for FLOP/s and a copy much larger than the
last-level cache for bandwidth, labelled ``measured``. On CUDA both are timed with CUDA events over
several calls (see :mod:`mhabench.measure.cuda_timing`).

A probe can come out slow (a busy machine: another process took the cores while it ran), never fast, so a
measured roof can sit below work a row then does. ``roof_source`` says how far a roof was corrected for that: a
row above a probed roof makes the run probe again and keep the larger figures (``re-probed``); a row still
above is itself the evidence, and the roof is raised to it (``raised to row``). A datasheet roof is never moved.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Iterable

import torch

from mhabench.errors import Word
from mhabench.measure.cuda_timing import cuda_event_times_ms, l2_cache_bytes


@dataclasses.dataclass(frozen=True)
class GpuDatasheet:
    """Dense (no sparsity) peaks of one GPU model, and the names it reports itself under."""

    model: str
    patterns: tuple[str, ...]
    tensor_tflops: float
    """bf16/fp16 on tensor cores."""
    tf32_tflops: float
    """fp32 matmuls on the TF32 tensor cores."""
    fp32_tflops: float
    """fp32 without tensor cores."""
    memory_tbps: float
    multiprocessors: int
    """SMs of the whole chip: a device reporting fewer is a partition of it."""
    fp8_tflops: float | None = None
    """fp8 (e4m3/e5m2) on tensor cores; None: the part has no fp8 tensor cores (A100)."""


# Figures: vendor datasheet (NVIDIA's H100, H200, GH200, A100, L40S and HGX B200 datasheets), dense
# rates, i.e. half the "with sparsity" figures; B200 per GPU = the HGX B200 8-GPU totals / 8. fp8:
# the datasheets' "FP8 Tensor Core" row halved the same way (H100 SXM 3,958 → 1,979; PCIe 3,026 →
# 1,513; NVL 3,341 → 1,671; L40S 1,466 → 733; HGX B200 72 PFLOPS / 8 / 2 → 4,500).
# Patterns are upper case with "-" and "_" read as spaces: how torch / nvidia-smi name the part.
GPU_DATASHEETS: tuple[GpuDatasheet, ...] = (
    GpuDatasheet(
        "H100 SXM", ("H100 80GB HBM3", "H100 SXM", "H100 SXM5"), 989.0, 495.0, 67.0, 3.35, 132, fp8_tflops=1979.0
    ),
    GpuDatasheet("H100 PCIe", ("H100 PCIE",), 756.0, 378.0, 51.0, 2.0, 114, fp8_tflops=1513.0),
    GpuDatasheet("H100 NVL", ("H100 NVL",), 835.0, 418.0, 60.0, 3.9, 132, fp8_tflops=1671.0),
    GpuDatasheet("H200 SXM", ("H200", "H200 SXM", "H200 141GB HBM3E"), 989.0, 495.0, 67.0, 4.8, 132, fp8_tflops=1979.0),
    GpuDatasheet("H200 NVL", ("H200 NVL",), 835.0, 418.0, 60.0, 4.8, 132, fp8_tflops=1671.0),
    GpuDatasheet("GH200 96GB", ("GH200", "GH200 480GB"), 989.0, 495.0, 67.0, 4.0, 132, fp8_tflops=1979.0),
    GpuDatasheet(
        "GH200 144GB", ("GH200 144G HBM3E", "GH200 144GB HBM3E"), 989.0, 495.0, 67.0, 4.9, 132, fp8_tflops=1979.0
    ),
    GpuDatasheet("A100 SXM 40GB", ("A100 SXM4 40GB", "A100 SXM 40GB"), 312.0, 156.0, 19.5, 1.555, 108),
    GpuDatasheet("A100 SXM 80GB", ("A100 SXM4 80GB", "A100 SXM 80GB"), 312.0, 156.0, 19.5, 2.039, 108),
    GpuDatasheet("A100 PCIe 40GB", ("A100 PCIE 40GB", "A100 PCIE"), 312.0, 156.0, 19.5, 1.555, 108),
    GpuDatasheet("A100 PCIe 80GB", ("A100 80GB PCIE", "A100 PCIE 80GB"), 312.0, 156.0, 19.5, 1.935, 108),
    GpuDatasheet("L40S", ("L40S",), 362.0, 183.0, 91.6, 0.864, 142, fp8_tflops=733.0),
    GpuDatasheet("B200", ("B200",), 2250.0, 1125.0, 75.0, 8.0, 148, fp8_tflops=4500.0),
)


class RoofSource(Word):
    """How a row's roofs were obtained, from the least to the most corrected."""

    DATASHEET = "datasheet"
    PROBED = "probed"
    """Measured once, before the process's first case."""
    REPROBED = "re-probed"
    """Measured again after a row ran above the first probe (or by another process of the run): the larger kept."""
    RAISED = "raised to row"
    """Raised to the fastest row's own throughput, which no probe reached."""


@dataclasses.dataclass(frozen=True)
class DevicePeaks:
    """Peak compute (TFLOP/s) and bandwidth (GB/s) for one device and dtype, and where they came from."""

    peak_tflops: float
    peak_gbps: float
    source: str
    fp8_tflops: float | None = None
    """The device's fp8 tensor rate where a datasheet gives one: the roof of rows that compute in fp8."""
    roof_source: RoofSource = RoofSource.PROBED
    probed_at: str | None = None
    """When a CPU roof was probed (UTC, ISO 8601); None for a datasheet's, or one probed before it was recorded."""
    reused_age_s: float | None = None
    """Seconds between the probe and the start of a run that reused it (:mod:`mhabench.run.roof_record`); None
    where the run probed its own."""

    def for_compute(self, compute_dtype: str | None) -> DevicePeaks | None:
        """The roof of a row that computes in ``compute_dtype`` (None: the case's dtype, these peaks): the fp8
        tensor rate for ``float8_*`` with the same bandwidth; None where this device has no known fp8 rate."""
        if compute_dtype is None:
            return self
        if not compute_dtype.startswith("float8") or self.fp8_tflops is None:
            return None
        return dataclasses.replace(self, peak_tflops=self.fp8_tflops, source=f"{self.source} (fp8 tensor rate)")

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.peak_tflops * 1e12 / (self.peak_gbps * 1e9)

    def attainable_tflops(self, intensity: float) -> float:
        """The roofline: min(compute peak, intensity × bandwidth)."""
        return min(self.peak_tflops, intensity * self.peak_gbps / 1e3)

    def bound(self, intensity: float) -> str:
        return "memory" if intensity < self.ridge_flops_per_byte else "compute"

    def below(self, points: Iterable[tuple[float, float]]) -> bool:
        """True when a (TFLOP/s, FLOP/B) point lies above this roofline: the roof is below work that was done."""
        return any(rate > self.attainable_tflops(intensity) for rate, intensity in points)

    def at_least(self, probe: DevicePeaks) -> DevicePeaks:
        """Each figure the larger of this roof's and a later ``probe``'s (``re-probed`` where the probe is higher)."""
        if probe.peak_tflops <= self.peak_tflops and probe.peak_gbps <= self.peak_gbps:
            return self
        return dataclasses.replace(
            self,
            peak_tflops=max(self.peak_tflops, probe.peak_tflops),
            peak_gbps=max(self.peak_gbps, probe.peak_gbps),
            source=f"{self.source}; re-probed",
            roof_source=RoofSource.REPROBED,
        )

    def raised_to(self, points: Iterable[tuple[float, float]]) -> DevicePeaks:
        """The lowest roof at or above this one that no (TFLOP/s, FLOP/B) point exceeds: the compute peak at least
        the fastest rate, the bandwidth at least the most bytes per second a point implies (rate / intensity)."""
        points = list(points)
        if not self.below(points):
            return self
        raised = dataclasses.replace(
            self,
            peak_tflops=max([self.peak_tflops, *(rate for rate, _ in points)]),
            peak_gbps=max([self.peak_gbps, *(rate / intensity * 1e3 for rate, intensity in points)]),
            source=f"{self.source}; raised to row",
            roof_source=RoofSource.RAISED,
        )
        while raised.below(points):  # rate / intensity × intensity can round a last bit below the rate
            tflops, gbps = math.nextafter(raised.peak_tflops, math.inf), math.nextafter(raised.peak_gbps, math.inf)
            raised = dataclasses.replace(raised, peak_tflops=tflops, peak_gbps=gbps)
        return raised


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


@functools.cache
def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo, or what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _normalized(name: str) -> str:
    return " ".join(re.sub(r"[-_]", " ", name).upper().split())


def _matches(pattern: str, name: str) -> bool:
    """``pattern`` occurs in ``name`` as whole words (no letter or digit glued to either end)."""
    return re.search(rf"(?<![A-Z0-9]){re.escape(pattern)}(?![A-Z0-9])", name) is not None


def match_datasheet(name: str) -> GpuDatasheet | None:
    """The table entry whose longest whole-word pattern occurs in ``name``; None for an unknown GPU."""
    normalized = _normalized(name)
    found = [(len(p), sheet) for sheet in GPU_DATASHEETS for p in sheet.patterns if _matches(p, normalized)]
    return max(found, key=lambda pair: pair[0])[1] if found else None


def tf32_enabled() -> bool:
    """True when fp32 matmuls may run on TF32 tensor cores (the fp32 roof is then the TF32 one)."""
    return bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"


FP32_MODES = {True: "fp32 via TF32 tensor cores", False: "fp32 without TF32"}


def fp32_matmul_mode() -> str:
    """What the fp32 roof assumes, for ``source`` and the manifest."""
    return FP32_MODES[tf32_enabled()]


def sheet_peaks(sheet: GpuDatasheet, dtype: torch.dtype, tf32: bool | None = None) -> DevicePeaks:
    """``sheet``'s roof for ``dtype``; ``tf32`` (default: torch's current setting) picks the fp32 one."""
    source, sheet_gbps = f"datasheet:{sheet.model}", sheet.memory_tbps * 1e3
    if dtype != torch.float32:
        return DevicePeaks(sheet.tensor_tflops, sheet_gbps, source, sheet.fp8_tflops, RoofSource.DATASHEET)
    use_tf32 = tf32_enabled() if tf32 is None else tf32
    tflops = sheet.tf32_tflops if use_tf32 else sheet.fp32_tflops
    mode = f"{source} ({FP32_MODES[use_tf32]})"
    return DevicePeaks(tflops, sheet_gbps, mode, sheet.fp8_tflops, RoofSource.DATASHEET)


def datasheet_peaks(name: str, dtype: torch.dtype, tf32: bool | None = None) -> DevicePeaks | None:
    """The table's figures for the GPU called ``name`` (None when unknown)."""
    sheet = match_datasheet(name)
    return None if sheet is None else sheet_peaks(sheet, dtype, tf32)


def mig_reason(name: str, multiprocessors: int, sheet: GpuDatasheet | None) -> str | None:
    """Why this device is a MIG slice (so whole-GPU peaks do not apply), or None for a whole GPU."""
    if "MIG" in _normalized(name).split():
        return f"MIG slice ({name})"
    if "MIG-" in os.environ.get("CUDA_VISIBLE_DEVICES", ""):
        return "MIG slice (CUDA_VISIBLE_DEVICES names a MIG device)"
    if sheet is not None and 0 < multiprocessors < sheet.multiprocessors:
        return f"MIG slice or partition: {multiprocessors} of the {sheet.model}'s {sheet.multiprocessors} SMs"
    return None


def _best_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Best host-timed call on the CPU (nothing asynchronous to wait for)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _cpu_matmul_tflops(dtype: torch.dtype, max_size: int, min_call_s: float, settled_call_s: float = math.inf) -> float:
    """Best matmul throughput, growing the square size until one call takes ``min_call_s``, or until a call takes
    ``settled_call_s`` and doubling the size raised the best throughput by no more than :data:`MATMUL_SETTLED`.

    Growing keeps the measurement to a few seconds even where a dtype is emulated
    (bf16 on a CPU without AMX/AVX512-BF16 runs at well under 1 GFLOP/s).
    """
    size, previous = 256, 0.0
    while True:
        a = torch.randn(size, size).to(dtype)
        b = torch.randn(size, size).to(dtype)
        seconds = _best_seconds(functools.partial(torch.matmul, a, b), repeats=5)
        tflops = 2 * size**3 / seconds / 1e12
        settled = seconds >= settled_call_s and tflops <= (1 + MATMUL_SETTLED) * previous
        if seconds >= min_call_s or settled or size >= max_size:
            return tflops
        size, previous = size * 2, tflops


CPU_MATMUL_CALL_S = 0.1
"""The probe's matmul grows until one call takes this long, at the most: the throughput of a large matmul, not a
call's fixed cost, is timed."""
CPU_MATMUL_SETTLED_CALL_S = 0.01
"""It stops sooner once a call takes this long (10,000 times ``perf_counter``'s resolution) and doubling the size did
not raise the throughput (:data:`MATMUL_SETTLED`): a larger matmul runs at the same rate. On the idle 2-vCPU VM
(torch 2.13.0+cpu, one thread) the probe then stops at 1024³ (about 14 ms a call) instead of 2048³ (0.11 s a call),
in a tenth of the time, within the spread of the old probe's figure (docs/findings/overhead.md)."""
MATMUL_SETTLED = 0.05
"""Doubling the size raised the best throughput by at most 5 %: the growth has settled."""


def _cpu_peaks(dtype: torch.dtype) -> DevicePeaks:
    tflops = _cpu_matmul_tflops(dtype, 4096, CPU_MATMUL_CALL_S, CPU_MATMUL_SETTLED_CALL_S)
    source = torch.empty(64 * 2**20, dtype=torch.uint8).fill_(1)  # 64 MiB
    target = torch.empty_like(source)
    copy_s = _best_seconds(lambda: target.copy_(source), repeats=10)
    return DevicePeaks(tflops, 2 * source.numel() / copy_s / 1e9, "measured")


# CUDA measurement sizes: an 8192³ matmul keeps an H100's tensor cores busy for > 1 ms; the copy is at
# least COPY_L2_MULTIPLE × L2 (and COPY_MIN_BYTES) so it streams from HBM, not from the L2.
CUDA_MATMUL_SIZE = 8192
COPY_L2_MULTIPLE = 16
COPY_MIN_BYTES = 1 << 30
MEASURE_CALLS = 10


def cuda_copy_bytes(l2_bytes: int, free_bytes: int) -> int:
    """Bytes per copy buffer: far larger than L2, and both buffers within a quarter of free memory."""
    return min(max(COPY_L2_MULTIPLE * l2_bytes, COPY_MIN_BYTES), free_bytes // 8)


def _cuda_matmul_tflops(device: torch.device, dtype: torch.dtype) -> float:
    a = torch.randn(CUDA_MATMUL_SIZE, CUDA_MATMUL_SIZE, device=device, dtype=dtype)
    b = torch.randn(CUDA_MATMUL_SIZE, CUDA_MATMUL_SIZE, device=device, dtype=dtype)
    torch.matmul(a, b)  # cuBLAS picks its kernel and workspace outside the timed calls
    times = cuda_event_times_ms(lambda: torch.matmul(a, b), device, MEASURE_CALLS, flush_l2=True, cuda_graphs=False)
    return 2 * CUDA_MATMUL_SIZE**3 / (statistics.median(times.device_ms) / 1e3) / 1e12


def _cuda_copy_gbps(device: torch.device, nbytes: int) -> float:
    """Bytes read plus bytes written per second by a device-to-device copy of ``nbytes``."""
    source = torch.ones(nbytes, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    times = cuda_event_times_ms(lambda: target.copy_(source), device, MEASURE_CALLS, flush_l2=False, cuda_graphs=False)
    return 2 * nbytes / (statistics.median(times.device_ms) / 1e3) / 1e9


def _cuda_peaks(device: torch.device, dtype: torch.dtype) -> DevicePeaks:
    tflops = _cuda_matmul_tflops(device, dtype)
    nbytes = cuda_copy_bytes(l2_cache_bytes(device), torch.cuda.mem_get_info(device)[0])
    gbps = _cuda_copy_gbps(device, nbytes)
    mode = f", {fp32_matmul_mode()}" if dtype == torch.float32 else ""
    where = f"CUDA events, median of {MEASURE_CALLS}: {CUDA_MATMUL_SIZE}³ matmul, {nbytes >> 20} MiB copy{mode}"
    return DevicePeaks(tflops, gbps, f"measured ({where})")


@functools.cache
def measured_peaks(device: torch.device, dtype: torch.dtype) -> DevicePeaks:
    """Measure matmul FLOP/s and copy bandwidth once per process for (device, dtype); ``cache_clear`` to probe
    again (:mod:`mhabench.run.roof`)."""
    with torch.inference_mode():
        return _cuda_peaks(device, dtype) if device.type == "cuda" else _cpu_peaks(dtype)


def device_peaks(device: torch.device, dtype: torch.dtype) -> DevicePeaks:
    """Datasheet figures for a known whole GPU, otherwise a measurement on this machine."""
    if device.type != "cuda":
        return measured_peaks(device, dtype)
    name = device_name(device)
    sheet = match_datasheet(name)
    mig = mig_reason(name, torch.cuda.get_device_properties(device).multi_processor_count, sheet)
    if sheet is not None and mig is None:
        return sheet_peaks(sheet, dtype)
    measured = measured_peaks(device, dtype)
    why = mig if mig is not None else f"no datasheet entry for {name!r}"
    return dataclasses.replace(measured, source=f"{measured.source}; {why}")
