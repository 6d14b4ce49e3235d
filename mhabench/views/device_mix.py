"""The device caveat and the between-device spread as lines: under a run's table, ``compare``, a history import.

The caveat is :mod:`mhabench.analysis.device_mix`'s, the spread :mod:`mhabench.analysis.device_spread`'s."""

from __future__ import annotations

from mhabench.analysis.device_mix import DeviceCaveat, DeviceMix
from mhabench.analysis.device_spread import DeviceSpread

NAMED_CASES = 3
"""How many split cases a line names; the rest are counted."""
SPREAD_HINT = "two GPUs of one model differ by a few percent; mhabench calibrate --devices measures by how much"


def device_lines(mix: DeviceMix | None) -> list[str]:
    """One line saying which devices the answer rests on, and one naming cases whose pairing crossed devices."""
    if mix is None:
        return []
    devices = ", ".join(f"{device} ({rows} rows)" for device, rows in mix.rows_per_device)
    if mix.code == DeviceCaveat.MIXED_DEVICES:
        lines = [
            f"devices: the cases were measured on {len(mix.devices)} devices: {devices}. Each case's implementations "
            f"shared one device, but a crossover or a trend across cases also holds the spread between devices "
            f"({SPREAD_HINT})"
        ]
    else:
        lines = [
            f"devices: the compared rows were measured on {len(mix.devices)} devices: {devices}. A ratio between "
            f"runs also holds the spread between devices ({SPREAD_HINT})"
        ]
    if mix.split_cases:
        named = ", ".join(mix.split_cases[:NAMED_CASES])
        more = f" and {len(mix.split_cases) - NAMED_CASES} more" if len(mix.split_cases) > NAMED_CASES else ""
        lines.append(
            f"devices: {len(mix.split_cases)} case(s) ran their implementations on more than one device, so their "
            f"speedups pair rounds of different devices: {named}{more}"
        )
    return lines


def spread_lines(spread: DeviceSpread) -> list[str]:
    """``calibrate --devices``: the spread, then each device against the typical one."""
    lines = [
        f"between-device spread {spread.between_device_spread:.1%} (median over {len(spread.pairs)} (case, "
        f"implementation) pairs of max/min − 1 of their median latency across {len(spread.devices)} devices; each "
        "device is one process, so this holds the between-process spread too)"
    ]
    lines += [f"{device}: {spread.relative_latency[device]:.3f}× the typical latency" for device in spread.devices]
    return lines
