"""Energy, SM clock and clock-event (throttle) reasons around each timed block, from NVML (``nvidia-ml-py``).

GPU ratios move between identical runs, and a row did not say what clock or power state its samples came
from: an 8192³ bf16 matmul loop on an H200 ran at ~655 W of its 700 W limit with the software power cap
holding the SM clock at ~1530 MHz. Here each timed block of the interleaved rounds
(:func:`mhabench.measure.rounds.run_rounds`) is bracketed by cheap NVML reads, outside the timed calls: the
total-energy counter (mJ since the driver loaded) before and after, and after it the SM clock and the current
clock-event reasons. Per row that gives the energy per call over its timed blocks, their average power, the SM
clock's median and minimum, every reason seen, and which rounds a power or thermal cap throttled (kept and
flagged: docs/measurement.md says why they are not discarded yet).

What the reads cannot see: the clock and reasons are read once, right after a block, so a cap that came and went
inside a block is missed; the energy counter's own update period blurs a block shorter than it, which is why a
row's energy is the sum over all its blocks, never one block's. The blocks' energy includes their lead kernels
(the L2 flush or the spin of :mod:`mhabench.measure.cuda_timing`).

``nvidia-ml-py`` is optional (``pip install mhabench[nvml]``); without it, or on the CPU, the columns are empty
and ``energy_source`` says why.
"""

from __future__ import annotations

import dataclasses
import importlib
import statistics
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from mhabench.results.schema import Energy

NO_NVML = "no nvidia-ml-py"
CPU_DEVICE = "CPU device"
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
"""NVML's clock-event reason bits (``nvmlClocksEventReason*``, formerly ``nvmlClocksThrottleReason*``)."""
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
"""The reasons that mean a power or thermal cap lowered the clock: a round with one of them is flagged."""


def reason_names(mask: int) -> list[str]:
    """The named reasons set in ``mask``, lowest bit first; an unknown bit by its hex value."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    return names + ([f"0x{unknown:x}"] if unknown else [])


def load_nvml() -> ModuleType | None:
    """The ``pynvml`` module of ``nvidia-ml-py``, or None when it is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


@dataclasses.dataclass(frozen=True)
class BlockReading:
    """What NVML said around one timed block."""

    energy_j: float
    seconds: float
    calls: int
    sm_clock_mhz: float
    reasons: int


class RoundSampler:
    """NVML reads around each timed block, kept per implementation in round order."""

    def __init__(self, nvml: Any, handle: Any, source: str, clock: Callable[[], float] = time.perf_counter) -> None:
        self.nvml = nvml
        self.handle = handle
        self.source = source
        self.clock = clock
        self.readings: dict[str, list[BlockReading]] = {}

    def before(self) -> tuple[float, float]:
        """The energy counter (mJ) and the clock, just before a block."""
        return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)), self.clock()

    def after(self, name: str, mark: tuple[float, float], calls: int) -> None:
        """Energy and time since ``mark``, then the SM clock and the reasons, just after ``name``'s block."""
        energy_mj, start_s = mark
        seconds = self.clock() - start_s
        spent_mj = float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)) - energy_mj
        clock_mhz = float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
        reading = BlockReading(spent_mj / 1e3, seconds, calls, clock_mhz, _reasons(self.nvml, self.handle))
        self.readings.setdefault(name, []).append(reading)

    def energy(self, name: str) -> Energy:
        """``name``'s energy columns over its blocks (the derived per-joule figures are :func:`per_joule`'s)."""
        readings = self.readings.get(name, [])
        if not readings:
            return Energy(energy_source=self.source)
        energy_j = sum(r.energy_j for r in readings)
        seconds = sum(r.seconds for r in readings)
        calls = sum(r.calls for r in readings)
        seen = 0
        for reading in readings:
            seen |= reading.reasons
        throttled = [index for index, r in enumerate(readings) if r.reasons & THROTTLE_MASK]
        clocks = [r.sm_clock_mhz for r in readings]
        return Energy(
            energy_per_call_j=energy_j / calls,
            average_power_w=energy_j / seconds if seconds > 0 else None,
            sm_clock_median_mhz=statistics.median(clocks),
            sm_clock_min_mhz=min(clocks),
            clock_event_reasons=",".join(reason_names(seen)),
            throttled_rounds=",".join(str(index) for index in throttled),
            throttled_share=len(throttled) / len(readings),
            energy_source=self.source,
        )


def _reasons(nvml: Any, handle: Any) -> int:
    """The current clock-event reasons (the older name of the call on drivers before it was renamed)."""
    query = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    return int(query(handle))


def _handle(nvml: Any, device: torch.device) -> Any:
    """The NVML handle of ``device``: by UUID (what CUDA_VISIBLE_DEVICES cannot renumber), else by index."""
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    if uuid:
        return nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    return nvml.nvmlDeviceGetHandleByIndex(device.index or 0)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def open_sampler(device: torch.device, nvml: Any | None = None) -> RoundSampler | str:
    """A sampler for ``device``, or why there is none (CPU device, no nvidia-ml-py, NVML's error)."""
    if device.type != "cuda":
        return CPU_DEVICE
    nvml = nvml if nvml is not None else load_nvml()
    if nvml is None:
        return NO_NVML
    try:
        nvml.nvmlInit()
        handle = _handle(nvml, device)
        source = f"nvml {_text(nvml.nvmlSystemGetDriverVersion())}"
        sampler = RoundSampler(nvml, handle, source)
        sampler.before()  # the energy counter exists on this GPU (it does not on some older ones)
    except Exception as exc:  # NVMLError and its many subclasses: one line, no measurement
        return f"NVML error: {exc}"
    return sampler


def per_joule(energy: Energy, flops: float | None, tokens: int) -> Energy:
    """``energy`` with FLOP and tokens per joule of one call, where its energy was measured."""
    if not energy.energy_per_call_j:
        return energy
    return dataclasses.replace(
        energy,
        flop_per_joule=flops / energy.energy_per_call_j if flops else None,
        tokens_per_joule=tokens / energy.energy_per_call_j,
    )


def gpu_settings(device: torch.device, nvml: Any | None = None) -> dict[str, Any]:
    """For the manifest: power limit (W), application clocks (MHz) and persistence mode; {} without NVML."""
    sampler = open_sampler(device, nvml)
    if isinstance(sampler, str):
        return {"source": sampler}
    nvml, handle = sampler.nvml, sampler.handle
    reads: dict[str, Callable[[], Any]] = {
        "power_limit_w": lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle) / 1e3,
        "application_sm_clock_mhz": lambda: nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_SM),
        "application_memory_clock_mhz": lambda: nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_MEM),
        "persistence_mode": lambda: bool(nvml.nvmlDeviceGetPersistenceMode(handle)),
    }
    settings: dict[str, Any] = {"source": sampler.source}
    for key, read in reads.items():
        try:
            settings[key] = read()
        except Exception:  # a setting this GPU or driver does not report stays out of the manifest
            continue
    return settings
