"""A row's GPU energy per call from its own windows, long enough for NVML's counter to resolve it.

The timed blocks of the interleaved rounds last a few milliseconds; NVML's total-energy counter moves in steps
about 100 ms apart, so energy read around them was off by up to 2× (docs/gpu.md, "Energy"). After a case's
rounds, each ok implementation runs back to back in windows of its own (``energy: windows``):

1. its calls are queued in batches of about :data:`BATCH_S` of device time, each batch synchronised and
   followed by a counter read, until the counter steps twice: the window starts on the second step, and the
   time between the two steps is the counter's step as this GPU shows it;
2. batches run until the window has lasted ``window_s``, then on until the counter steps again: the window ends
   on that step, so both ends sit on counter updates and the energy between them is whole;
3. energy per call = the window's energy / the calls it ran; average power = energy / the window's time.

Repeated ``windows`` times; the row gets the median of each, the windows' spread and the uncertainty one step
makes over the shortest window (:func:`mhabench.results.energy.unresolved_reason` then decides whether the
figure counts). The calls run without the timing's lead kernel, so L2 stays as the previous call left it: the
energy of a call in steady back-to-back use, which is what a serving loop pays.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from mhabench.measure.nvml import RoundSampler
from mhabench.results.energy import unresolved_reason
from mhabench.results.gpu_groups import Energy
from mhabench.scenario.config import EnergyConfig

BATCH_S = 0.002
"""Device time queued between two counter reads: fine against a ~100 ms step, coarse enough that the reads
and synchronisations do not leave the GPU idle for a measurable share of the window."""
STEP_TIMEOUT_S = 2.0
"""The longest the counter may stand still while calls run before the window gives up (no update: no figure)."""
MAX_BATCH_CALLS = 10_000
"""Cap on a batch's calls: a call timed at ~0 ms (a rounding, a broken latency) must not queue millions of calls
before the first counter read."""


class CounterStalled(RuntimeError):
    """NVML's energy counter did not move while calls ran: there is no window to read."""


@dataclasses.dataclass(frozen=True)
class Window:
    """One energy window: its energy, wall time, the calls it ran, and the counter step seen before it."""

    energy_j: float
    seconds: float
    calls: int
    step_s: float

    @property
    def per_call_j(self) -> float:
        return self.energy_j / self.calls

    @property
    def power_w(self) -> float:
        return self.energy_j / self.seconds


@dataclasses.dataclass
class WindowMeter:
    """Energy windows of one callable on one GPU: NVML's module and handle, a synchronising batch runner, a clock.

    ``run_batch(calls)`` queues ``calls`` calls and waits for them (the real one synchronises the device)."""

    nvml: Any
    handle: Any
    run_batch: Callable[[int], object]
    clock: Callable[[], float] = time.perf_counter

    def _energy_mj(self) -> float:
        return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def _until_step(self, batch: int, last_mj: float) -> tuple[float, float, int]:
        """Run batches until the counter leaves ``last_mj``: (its new value, the time it was seen, calls run)."""
        calls = 0
        start_s = self.clock()
        while True:
            self.run_batch(batch)
            calls += batch
            now_mj, now_s = self._energy_mj(), self.clock()
            if now_mj != last_mj:
                return now_mj, now_s, calls
            if now_s - start_s > STEP_TIMEOUT_S:
                raise CounterStalled(f"NVML's energy counter did not move for {STEP_TIMEOUT_S:g} s")

    def window(self, batch: int, window_s: float) -> Window:
        """One window of at least ``window_s``, from one counter step to another, with ``batch`` calls per read."""
        first_mj, first_s, _ = self._until_step(batch, self._energy_mj())
        start_mj, start_s, _ = self._until_step(batch, first_mj)
        calls = 0
        while self.clock() - start_s < window_s:
            self.run_batch(batch)
            calls += batch
        end_mj, end_s, tail = self._until_step(batch, self._energy_mj())
        return Window((end_mj - start_mj) / 1e3, end_s - start_s, calls + tail, start_s - first_s)


def batch_calls(latency_ms: float) -> int:
    """Calls per batch: about :data:`BATCH_S` of device time, at least one."""
    if not latency_ms > 0:
        return 1
    return max(1, min(MAX_BATCH_CALLS, round(BATCH_S * 1e3 / latency_ms)))


def measure_energy(
    meter: WindowMeter, latency_ms: float, window_s: float, windows: int, source: str, power_limit_w: float | None
) -> Energy:
    """The row's energy columns over ``windows`` windows of ``window_s`` (the clock columns are the rounds')."""
    try:
        readings = [meter.window(batch_calls(latency_ms), window_s) for _ in range(windows)]
    except Exception as exc:  # CounterStalled, or NVMLError where this GPU has no energy counter (MIG, older ones)
        return Energy(energy_source=f"{source}; energy not resolved: {exc}")
    return energy_of(readings, source, power_limit_w)


def energy_of(readings: list[Window], source: str, power_limit_w: float | None) -> Energy:
    """Medians over the windows, their spread, and the uncertainty of one counter step over the shortest
    window; energy per call and power stay empty, with the reason in ``energy_source``, where the rule of
    :mod:`mhabench.results.energy` says the windows cannot resolve them."""
    per_call = [reading.per_call_j for reading in readings]
    window_s = statistics.median(reading.seconds for reading in readings)
    power_w = statistics.median(reading.power_w for reading in readings)
    step_s = statistics.median(reading.step_s for reading in readings)
    median_j = statistics.median(per_call)
    columns = Energy(
        energy_window_s=window_s,
        energy_windows=len(readings),
        energy_uncertainty=step_s / min(reading.seconds for reading in readings),
        energy_spread=(max(per_call) - min(per_call)) / median_j if median_j > 0 else None,
    )
    reason = unresolved_reason(power_w, min(reading.seconds for reading in readings), power_limit_w)
    if reason:
        return dataclasses.replace(columns, energy_source=f"{source}; energy not resolved: {reason}")
    return dataclasses.replace(columns, energy_per_call_j=median_j, average_power_w=power_w, energy_source=source)


def window_energy(
    sampler: RoundSampler, call: Callable[[], object], latency_ms: float, config: EnergyConfig, device: torch.device
) -> Energy:
    """``call``'s energy columns from ``config.windows`` windows on ``device``, through ``sampler``'s NVML session."""

    def run_batch(calls: int) -> None:
        for _ in range(calls):
            call()
        if device.type == "cuda":  # the reads must follow the calls' work, not their launches
            torch.cuda.synchronize(device)

    meter = WindowMeter(sampler.nvml, sampler.handle, run_batch)
    return measure_energy(meter, latency_ms, config.window_s, config.windows, sampler.source, sampler.power_limit_w())
