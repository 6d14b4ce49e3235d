"""``mhabench calibrate --devices``: how far apart the devices put the same case's latency.

An answer whose cases ran on different devices (:mod:`mhabench.analysis.device_mix`) is read against it.

The same sweep (the calibration config) is measured once on each device; per (case, implementation) the range
``max / min − 1`` of its median latency across the devices, and the spread is the median of those ranges. Each
device is one process, so the range also holds the between-process spread (``mhabench calibrate``): a device
spread not above it says the devices do not differ measurably.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mhabench.analysis.estimate import between_process_range
from mhabench.errors import InputError
from mhabench.results.columns import CASE_ID, IMPL, LATENCY_MS, STATUS
from mhabench.results.schema import RowStatus

DEVICE_ID = "device_id"


@dataclasses.dataclass(frozen=True)
class DeviceSpread:
    """The devices measured, each pair's range, and their median: the between-device spread."""

    devices: tuple[str, ...]
    pairs: tuple[float, ...]
    """Each (case, implementation)'s range of its median latency across the devices."""
    between_device_spread: float
    relative_latency: dict[str, float]
    """Per device, the median over pairs of its latency over the pair's median across devices (1.0: typical)."""


def device_spread(frames: Sequence[pd.DataFrame]) -> DeviceSpread:
    """The spread between the devices the ok rows of ``frames`` were measured on (two devices at least)."""
    rows = pd.concat([frame for frame in frames if not frame.empty], ignore_index=True) if frames else pd.DataFrame()
    if rows.empty or DEVICE_ID not in rows:
        raise InputError("calibrate --devices: no rows with a device_id to compare")
    ok = rows[(rows[STATUS] == RowStatus.OK) & (rows[DEVICE_ID].fillna("").astype(str) != "")]
    devices = tuple(sorted(ok[DEVICE_ID].astype(str).unique()))
    if len(devices) < 2:
        raise InputError(f"calibrate --devices: the rows name {len(devices)} device(s); the spread needs two or more")
    table = ok.groupby([CASE_ID, IMPL, DEVICE_ID])[LATENCY_MS].median().unstack(DEVICE_ID).dropna()
    if table.empty:
        raise InputError("calibrate --devices: no (case, implementation) was measured on every device")
    pairs = tuple(between_process_range(list(row)) for _, row in table.iterrows())
    relative = table.div(table.median(axis=1), axis=0).median(axis=0)
    return DeviceSpread(
        devices,
        pairs,
        float(np.median(pairs)),
        {str(device): float(value) for device, value in relative.items()},
    )
