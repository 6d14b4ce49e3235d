"""Device peaks for the roofline: a datasheet table for known GPUs, a measurement otherwise.

GPU figures are dense peaks from ../shared/reference/performance-model.md (sparse datasheet numbers
are 2× these). CPUs have no datasheet figure we can trust, so we measure: a large matmul for
FLOP/s and a large copy for bandwidth, best of a few repetitions, labelled ``measured``.
"""

from __future__ import annotations

import dataclasses
import functools
import platform
import time
from collections.abc import Callable

import torch

# name fragment → (bf16/fp16 tensor TFLOP/s, fp32 TFLOP/s without tensor cores, TB/s)
GPU_PEAKS: dict[str, tuple[float, float, float]] = {
    "H100 PCIe": (756.0, 51.0, 2.0),
    "H100": (989.0, 67.0, 3.35),  # SXM; after "H100 PCIe" so PCIe matches first
    "H200": (989.0, 67.0, 4.8),
    "A100": (312.0, 19.5, 2.04),
}


@dataclasses.dataclass(frozen=True)
class DevicePeaks:
    """Peak compute (TFLOP/s) and bandwidth (GB/s) for one device and dtype, and where they came from."""

    peak_tflops: float
    peak_gbps: float
    source: str

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.peak_tflops * 1e12 / (self.peak_gbps * 1e9)

    def attainable_tflops(self, intensity: float) -> float:
        """The roofline: min(compute peak, intensity × bandwidth)."""
        return min(self.peak_tflops, intensity * self.peak_gbps / 1e3)

    def bound(self, intensity: float) -> str:
        return "memory" if intensity < self.ridge_flops_per_byte else "compute"


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


def datasheet_peaks(name: str, dtype: torch.dtype) -> DevicePeaks | None:
    """The table's figures for a GPU whose name contains a known fragment."""
    for fragment, (tensor_tflops, fp32_tflops, tbps) in GPU_PEAKS.items():
        if fragment in name:
            tflops = fp32_tflops if dtype == torch.float32 else tensor_tflops
            return DevicePeaks(tflops, tbps * 1e3, f"datasheet:{fragment}")
    return None


def _best_seconds(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


def _matmul_tflops(device: torch.device, dtype: torch.dtype, max_size: int, min_call_s: float) -> float:
    """Best matmul throughput, growing the square size until one call takes ``min_call_s``.

    Growing keeps the measurement to a few seconds even where a dtype is emulated
    (bf16 on a CPU without AMX/AVX512-BF16 runs at well under 1 GFLOP/s).
    """
    size = 256
    while True:
        a = torch.randn(size, size, device=device).to(dtype)
        b = torch.randn(size, size, device=device).to(dtype)
        seconds = _best_seconds(functools.partial(torch.matmul, a, b), device, repeats=5)
        if seconds >= min_call_s or size >= max_size:
            return 2 * size**3 / seconds / 1e12
        size *= 2


@functools.cache
def measured_peaks(device: torch.device, dtype: torch.dtype) -> DevicePeaks:
    """Measure matmul FLOP/s and copy bandwidth once per process for (device, dtype)."""
    with torch.inference_mode():
        tflops = _matmul_tflops(device, dtype, max_size=4096, min_call_s=0.1)
        source = torch.empty(64 * 2**20, dtype=torch.uint8, device=device).fill_(1)  # 64 MiB
        target = torch.empty_like(source)
        copy_s = _best_seconds(lambda: target.copy_(source), device, repeats=10)
    gbps = 2 * source.numel() / copy_s / 1e9
    return DevicePeaks(tflops, gbps, "measured")


def device_peaks(device: torch.device, dtype: torch.dtype) -> DevicePeaks:
    """Datasheet figures for a known GPU, otherwise a measurement on this machine."""
    if device.type == "cuda":
        known = datasheet_peaks(device_name(device), dtype)
        if known is not None:
            return known
    return measured_peaks(device, dtype)
