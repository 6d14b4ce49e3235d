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
row's energy is the sum over all its blocks, never one block's. Every timed call runs behind a lead kernel (the
L2 flush or the spin of :mod:`mhabench.measure.cuda_timing`) whose energy the blocks include: after the rounds,
a block of the lead alone is read the same way (:meth:`RoundSampler.read_leads`), and its energy per lead is taken
off each call's. A block's count is the calls it actually ran, its host-timed call included.

``nvidia-ml-py`` is optional (``pip install mhabench[nvml]``); without it, or on the CPU, the columns are empty
and ``energy_source`` says why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import statistics
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import torch

from mhabench.results.gpu_groups import Energy

NO_NVML = "no nvidia-ml-py"
CPU_DEVICE = "CPU device"
ENERGY_STEP_J = 1e-3
"""NVML's total-energy counter counts whole millijoules: each difference of two reads is uncertain by one step."""
UUID_PREFIXES = ("GPU-", "MIG-")
"""NVML's UUID strings: a whole GPU's start ``GPU-``, a MIG instance's ``MIG-``; torch may give the bare UUID."""
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
    """What NVML said around one block: timed calls behind their leads, or (:meth:`RoundSampler.read_leads`) leads
    alone."""

    energy_j: float
    seconds: float
    calls: int
    """Calls the block ran (the host-timed one included), or leads in a lead-only block: what its energy is over."""
    sm_clock_mhz: float
    reasons: int


class RoundSampler:
    """NVML reads around each timed block, kept per implementation in round order, and around a block of its leads."""

    def __init__(self, nvml: Any, handle: Any, source: str, clock: Callable[[], float] = time.perf_counter) -> None:
        self.nvml = nvml
        self.handle = handle
        self.source = source
        self.clock = clock
        self.readings: dict[str, list[BlockReading]] = {}
        self.lead_readings: dict[str, BlockReading] = {}

    def before(self) -> tuple[float, float]:
        """The energy counter (mJ) and the clock, just before a block."""
        return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)), self.clock()

    def _reading(self, mark: tuple[float, float], calls: int) -> BlockReading:
        """Energy and time since ``mark``, then the SM clock and the reasons, just after a block of ``calls``."""
        energy_mj, start_s = mark
        seconds = self.clock() - start_s
        spent_mj = float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)) - energy_mj
        clock_mhz = float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
        return BlockReading(spent_mj / 1e3, seconds, calls, clock_mhz, _reasons(self.nvml, self.handle))

    def after(self, name: str, mark: tuple[float, float], calls: int) -> None:
        """Record ``name``'s block of ``calls`` calls (each behind one lead, if ``name`` has a lead reading)."""
        self.readings.setdefault(name, []).append(self._reading(mark, calls))

    def read_leads(self, names: list[str], run: Callable[[int], object], leads: int) -> None:
        """Read a block of ``leads`` leads alone (``run(leads)`` queues them and waits); the implementations in
        ``names``, whose calls ran behind that lead, get it as their lead reading."""
        mark = self.before()
        run(leads)
        reading = self._reading(mark, leads)
        self.lead_readings.update(dict.fromkeys(names, reading))

    def energy(self, name: str) -> Energy:
        """``name``'s energy columns over its blocks (the derived per-joule figures are :func:`per_joule`'s).

        ``energy_per_call_j`` is the blocks' energy less, per call, the lead's energy per lead from its
        lead-only block, over the calls the blocks ran; where what is left is not above the counter's steps
        over those reads (the leads' energy swamped the calls'), it is left empty and ``energy_source`` says so.
        ``average_power_w`` is what the GPU drew over the blocks, leads included."""
        readings = self.readings.get(name, [])
        calls = sum(r.calls for r in readings)
        if not readings or calls <= 0:
            return Energy(energy_source=self.source)
        energy_j = sum(r.energy_j for r in readings)
        seconds = sum(r.seconds for r in readings)
        per_call_j, source = self._per_call_j(name, energy_j, calls, len(readings))
        seen = 0
        for reading in readings:
            seen |= reading.reasons
        throttled = [index for index, r in enumerate(readings) if r.reasons & THROTTLE_MASK]
        clocks = [r.sm_clock_mhz for r in readings]
        return Energy(
            energy_per_call_j=per_call_j,
            average_power_w=energy_j / seconds if seconds > 0 else None,
            sm_clock_median_mhz=statistics.median(clocks),
            sm_clock_min_mhz=min(clocks),
            clock_event_reasons=",".join(reason_names(seen)),
            throttled_rounds=",".join(str(index) for index in throttled),
            throttled_share=len(throttled) / len(readings),
            energy_source=source,
        )

    def _per_call_j(self, name: str, energy_j: float, calls: int, reads: int) -> tuple[float | None, str]:
        """Energy per call with its lead's taken off (one lead per call), and the source to say with it.

        The calls' energy must stand above the counter's step on each of the ``reads`` block readings and on
        the lead-only one (the lead's share never exceeds its own reading: it ran at least as many leads)."""
        lead = self.lead_readings.get(name)
        lead_j = lead.energy_j / lead.calls if lead is not None and lead.calls > 0 else 0.0
        calls_j = energy_j - calls * lead_j
        if calls_j > ENERGY_STEP_J * (reads + (lead is not None)):
            return calls_j / calls, self.source
        return (
            None,
            f"{self.source}; energy per call not resolved: the leads' energy left none above the counter's steps",
        )


def _reasons(nvml: Any, handle: Any) -> int:
    """The current clock-event reasons (the older name of the call on drivers before it was renamed)."""
    query = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    return int(query(handle))


def _handle(nvml: Any, device: torch.device) -> Any:
    """The NVML handle of ``device``: by UUID (what CUDA_VISIBLE_DEVICES cannot renumber), else by index.

    torch may give the UUID without NVML's prefix, and a MIG instance's (CUDA reports the instance's own UUID)
    takes ``MIG-``, not ``GPU-``: a bare UUID is looked up under each prefix, and only the device that owns it
    answers (UUIDs are unique), so no prefix is guessed into a wrong handle."""
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    if not uuid:
        return nvml.nvmlDeviceGetHandleByIndex(device.index or 0)
    if uuid.startswith(UUID_PREFIXES):
        return nvml.nvmlDeviceGetHandleByUUID(uuid)
    failures: list[Exception] = []
    for prefix in UUID_PREFIXES:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(prefix + uuid)
        except Exception as exc:  # NVMLError_NotFound under the other prefix
            failures.append(exc)
    raise failures[-1]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _sampler(nvml: Any, device: torch.device) -> RoundSampler | str:
    """A sampler on an initialised NVML, or NVML's error as one line."""
    try:
        handle = _handle(nvml, device)
        source = f"nvml {_text(nvml.nvmlSystemGetDriverVersion())}"
        sampler = RoundSampler(nvml, handle, source)
        sampler.before()  # the energy counter exists on this GPU (it does not on some older ones, nor on a MIG one)
    except Exception as exc:  # NVMLError and its many subclasses: one line, no measurement
        return f"NVML error: {exc}"
    return sampler


@contextlib.contextmanager
def open_sampler(device: torch.device, nvml: Any | None = None) -> Iterator[RoundSampler | str]:
    """A sampler for ``device`` while the block runs, or why there is none (CPU device, no nvidia-ml-py, NVML's
    error). NVML counts its initialisations: each ``nvmlInit`` here is paired with an ``nvmlShutdown`` on the way
    out, so a run of many cases leaves NVML as it found it."""
    if device.type != "cuda":
        yield CPU_DEVICE
        return
    nvml = nvml if nvml is not None else load_nvml()
    if nvml is None:
        yield NO_NVML
        return
    try:
        nvml.nvmlInit()
    except Exception as exc:  # no driver, or NVML's library missing
        yield f"NVML error: {exc}"
        return
    try:
        yield _sampler(nvml, device)
    finally:
        with contextlib.suppress(Exception):  # a failed shutdown must not hide the block's own error
            nvml.nvmlShutdown()


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
    with open_sampler(device, nvml) as sampler:
        if isinstance(sampler, str):
            return {"source": sampler}
        return {"source": sampler.source, **_settings(sampler.nvml, sampler.handle)}


def _settings(nvml: Any, handle: Any) -> dict[str, Any]:
    """The settings this GPU and driver report; one they do not stays out (never guessed)."""
    reads: dict[str, Callable[[], Any]] = {
        "power_limit_w": lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle) / 1e3,
        "application_sm_clock_mhz": lambda: nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_SM),
        "application_memory_clock_mhz": lambda: nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_MEM),
        "persistence_mode": lambda: bool(nvml.nvmlDeviceGetPersistenceMode(handle)),
    }
    settings: dict[str, Any] = {}
    for key, read in reads.items():
        try:
            settings[key] = read()
        except Exception:  # a setting this GPU or driver does not report stays out of the manifest
            continue
    return settings
