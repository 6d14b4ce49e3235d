"""When a row's NVML energy is a measurement: the one rule, applied when a run is written and when it is read.

NVML's total-energy counter moves in steps about 100 ms apart (H100, driver 580:
``../shared/runs/h100-20261127/nvml-energy-windows.txt``), so energy over a window of T seconds is uncertain
by about one step / T of its average power. The H100's timed blocks lasted a few milliseconds and read up to
1,580 W against a 700 W limit, or 0.0024 J a call where the same work read 0.30 J. So a row's energy counts
only when its window was at least :data:`MIN_WINDOW_S` long and its average power lies in
[0, power limit × :data:`POWER_LIMIT_MARGIN`]; otherwise its energy figures are empty and the reason says
which test failed. A run written before energy windows existed (no ``energy_window_s``) is judged by the time
its timed blocks can have lasted at most (samples × calls per sample × the median call), which for every
recorded row is far under the minimum.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from mhabench.results.cells import number

MIN_WINDOW_S = 1.0
"""The shortest window whose energy counts: 10 counter steps, so at most ~10 % off (a 0.3 s window read 773 W
on a 700 W H100; 1.6 s read 730 W, 4.8 s 697 W)."""
POWER_LIMIT_MARGIN = 1.02
"""An average power above the board's limit by more than 2 % is not what the GPU drew: the counter's steps
were counted over too short a window (the power limit is enforced over about a second)."""
COUNTER_STEP_S = 0.1
"""NVML's energy counter step on the H100 test machine: what an old row's uncertainty is stated against."""


@dataclasses.dataclass(frozen=True)
class EnergyReading:
    """A row's energy figures as they may be shown: empty (None) with ``unresolved`` saying why, or resolved."""

    energy_per_call_j: float | None
    average_power_w: float | None
    tokens_per_joule: float | None
    window_s: float | None
    uncertainty: float | None
    unresolved: str = ""
    unresolved_kind: str = ""
    """``unresolved`` without the row's own figures: what a report counts unresolved rows by."""

    @property
    def resolved(self) -> bool:
        return self.energy_per_call_j is not None


def failed_tests(
    average_power_w: float | None, window_s: float | None, power_limit_w: float | None
) -> list[tuple[str, str]]:
    """(kind, reason) of every test energy over this window fails: the kind names the test, the reason adds the
    row's figures. ``window_s`` None: the window's length is unknown, which no figure can rest on."""
    failed: list[tuple[str, str]] = []
    if window_s is None or not math.isfinite(window_s):
        failed.append(("no energy window recorded", "no energy window recorded"))
    elif window_s < MIN_WINDOW_S:
        reason = f"window {window_s:.3g} s, under the {MIN_WINDOW_S:g} s NVML's ~{COUNTER_STEP_S:g} s steps need"
        failed.append((f"window under {MIN_WINDOW_S:g} s", reason))
    if average_power_w is None or not math.isfinite(average_power_w) or average_power_w < 0:
        failed.append(("average power not a power", f"average power {average_power_w} W is not a power"))
    elif power_limit_w is not None and average_power_w > power_limit_w * POWER_LIMIT_MARGIN:
        limit = f"power limit × {POWER_LIMIT_MARGIN:g}"
        reason = f"average power {average_power_w:.0f} W above the {power_limit_w:.0f} W {limit}"
        failed.append((f"average power above the {limit}", reason))
    return failed


def unresolved_reason(average_power_w: float | None, window_s: float | None, power_limit_w: float | None) -> str:
    """Why energy over this window is no measurement (every test it fails, "; "-joined), or "" when it is one."""
    return "; ".join(reason for _, reason in failed_tests(average_power_w, window_s, power_limit_w))


def blocks_upper_bound_s(record: Mapping[str, object]) -> float | None:
    """The longest its timed blocks can have lasted, for a row written before energy windows: samples × calls
    per sample × its median call (the leads run outside the calls but inside the blocks; a flush is µs)."""
    samples, calls, latency_ms = (number(record, name) for name in ("samples", "calls_per_sample", "latency_ms"))
    if samples is None or calls is None or latency_ms is None:
        return None
    return samples * calls * latency_ms / 1e3


def reading(record: Mapping[str, object], power_limit_w: float | None) -> EnergyReading:
    """A stored row's energy as it may be shown, under the rule above, whatever format wrote it."""
    per_call_j, power_w = number(record, "energy_per_call_j"), number(record, "average_power_w")
    window_s = number(record, "energy_window_s")
    uncertainty = number(record, "energy_uncertainty")
    if window_s is None and per_call_j is not None:  # written before energy windows: its blocks were the window
        blocks_s = blocks_upper_bound_s(record)
        failed = failed_tests(power_w, blocks_s, power_limit_w) or [("no energy window recorded",) * 2]
        span = f"{blocks_s:.3g} s at most" if blocks_s is not None else "of unknown length"
        why, kinds = "; ".join(reason for _, reason in failed), "; ".join(kind for kind, _ in failed)
        reason, kind = f"read over timed blocks {span}, not a window: {why}", f"read over timed blocks: {kinds}"
        return EnergyReading(None, None, None, blocks_s, None, reason, kind)
    if per_call_j is None:
        source = str(record.get("energy_source") or "not measured")
        return EnergyReading(None, None, None, window_s, uncertainty, source, source)
    failed = failed_tests(power_w, window_s, power_limit_w)
    if failed:
        why, kinds = "; ".join(reason for _, reason in failed), "; ".join(kind for kind, _ in failed)
        return EnergyReading(None, None, None, window_s, uncertainty, why, kinds)
    return EnergyReading(per_call_j, power_w, number(record, "tokens_per_joule"), window_s, uncertainty)


def power_limit_of(environment: Mapping[str, object]) -> float | None:
    """The run's power limit (W) from its manifest's environment: the NVML settings, else nvidia-smi's."""
    nvml = environment.get("nvml")
    candidates = [nvml.get("power_limit_w") if isinstance(nvml, Mapping) else None, environment.get("power_limit_w")]
    for value in candidates:
        try:
            return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
    return None
