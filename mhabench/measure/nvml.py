"""SM clock and clock-event (throttle) reasons around each timed block, and the NVML session energy windows use.

GPU ratios move between identical runs, and a row did not say what clock or power state its samples came
from: an 8192³ bf16 matmul loop on an H200 ran at ~655 W of its 700 W limit with the software power cap
holding the SM clock at ~1530 MHz. Here each timed block of the interleaved rounds
(:func:`mhabench.measure.rounds.run_rounds`) is followed by cheap NVML reads, outside the timed calls: the SM
clock and the current clock-event reasons. Per row that gives the SM clock's median and minimum, every reason
seen, and which rounds a power or thermal cap throttled (kept and flagged: docs/measurement.md says why they are
not discarded yet).

Energy is not read around the blocks: they last milliseconds and NVML's energy counter moves in ~100 ms steps,
which made the H100's blocks read up to 1,580 W on a 700 W board. A row's energy comes from windows of its own
after the rounds (:mod:`mhabench.measure.energy_window`, ``energy: windows``), through the same NVML session.
What the reads cannot see: the clock and reasons are read once, right after a block, so a cap that came and went
inside a block is missed.

``nvidia-ml-py`` is optional (``pip install mhabench[nvml]``); without it, or on the CPU, the columns are empty
and ``energy_source`` says why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import statistics
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import torch

from mhabench.results.gpu_groups import Energy

NO_NVML = "no nvidia-ml-py"
CPU_DEVICE = "CPU device"
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
    """What NVML said right after one timed block."""

    sm_clock_mhz: float
    reasons: int


ENERGY_OFF = "energy windows off (energy: windows measures them)"
"""``energy_source``'s note where NVML was read but no energy window was asked for."""


class RoundSampler:
    """NVML reads after each timed block, kept per implementation in round order; the session energy windows use."""

    def __init__(self, nvml: Any, handle: Any, source: str) -> None:
        self.nvml = nvml
        self.handle = handle
        self.source = source
        self.readings: dict[str, list[BlockReading]] = {}

    def after(self, name: str) -> None:
        """Record the SM clock and the clock-event reasons just after one of ``name``'s blocks."""
        clock_mhz = float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
        self.readings.setdefault(name, []).append(BlockReading(clock_mhz, _reasons(self.nvml, self.handle)))

    def power_limit_w(self) -> float | None:
        """The board's power limit (W), or None where this GPU or driver does not report one."""
        try:
            return float(self.nvml.nvmlDeviceGetPowerManagementLimit(self.handle)) / 1e3
        except Exception:  # NVMLError_NotSupported and its kin: the rule then has no limit to test against
            return None

    def energy(self, name: str) -> Energy:
        """``name``'s clock columns over its blocks; its energy columns are the energy windows' (empty here,
        ``energy_source`` saying the windows are off until :func:`with_windows` fills them)."""
        readings = self.readings.get(name, [])
        if not readings:
            return Energy(energy_source=self.source)
        seen = 0
        for reading in readings:
            seen |= reading.reasons
        throttled = [index for index, r in enumerate(readings) if r.reasons & THROTTLE_MASK]
        clocks = [r.sm_clock_mhz for r in readings]
        return Energy(
            sm_clock_median_mhz=statistics.median(clocks),
            sm_clock_min_mhz=min(clocks),
            clock_event_reasons=",".join(reason_names(seen)),
            throttled_rounds=",".join(str(index) for index in throttled),
            throttled_share=len(throttled) / len(readings),
            energy_source=f"{self.source}; {ENERGY_OFF}",
            sm_clock_rounds_mhz=",".join(f"{clock:.0f}" for clock in clocks),
        )


def with_windows(rounds: Energy, windows: Energy) -> Energy:
    """The rounds' clock columns with the energy windows' columns (and their source) over them."""
    filled = {
        field.name: value
        for field in dataclasses.fields(windows)
        if (value := getattr(windows, field.name)) is not None
    }
    return dataclasses.replace(rounds, **filled)


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
