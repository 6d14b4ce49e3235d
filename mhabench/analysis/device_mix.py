"""Whether an answer rests on rows measured on more than one physical device (``device_id``), as a typed caveat.

Every implementation of a case runs on one device in the same rounds, so a pick within a case is paired on one
GPU. What crosses cases (a crossover, a trend over the sweep), crosses runs (``compare``) or crosses time
(``history``) may rest on different GPUs of one model, which differ by a few percent: that spread is part of the
answer (``mhabench calibrate --devices`` measures it). A case whose own rows ran on more than one device is named
apart: its speedups pair rounds of different GPUs. Views render the caveat (:mod:`mhabench.views.device_mix`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import pandas as pd

from mhabench.errors import Word

DEVICE_ID = "device_id"
CASE_ID = "case_id"


class DeviceCaveat(Word):
    """What the caveat concerns: one run's cases, two compared runs, or the runs of a history."""

    MIXED_DEVICES = "mixed_devices"
    """The cases of one run were measured on more than one device."""
    COMPARED_ACROSS_DEVICES = "compared_across_devices"
    """Two compared runs (or a history's runs) measured on different devices."""


@dataclasses.dataclass(frozen=True)
class DeviceMix:
    """The devices an answer rests on, with how many rows each measured, and the cases split between devices."""

    code: DeviceCaveat
    rows_per_device: tuple[tuple[str, int], ...]
    split_cases: tuple[str, ...] = ()

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(device for device, _ in self.rows_per_device)


def _counts(frames: Iterable[pd.DataFrame]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for frame in frames:
        if DEVICE_ID not in frame:
            continue
        for device in frame[DEVICE_ID].dropna().astype(str):
            if device:
                counts[device] = counts.get(device, 0) + 1
    return counts


def _split_cases(frame: pd.DataFrame) -> tuple[str, ...]:
    """Cases whose own rows carry more than one device id (their pairing crossed devices)."""
    if DEVICE_ID not in frame or frame.empty:
        return ()
    known = frame[frame[DEVICE_ID].fillna("").astype(str) != ""]
    devices = known.groupby(CASE_ID)[DEVICE_ID].nunique()
    return tuple(sorted(str(case) for case in devices[devices > 1].index))


def run_device_mix(rows: pd.DataFrame) -> DeviceMix | None:
    """One run's rows on more than one device: its crossovers and answers across cases mix devices."""
    counts = _counts([rows])
    if len(counts) < 2:
        return None
    return DeviceMix(DeviceCaveat.MIXED_DEVICES, tuple(sorted(counts.items())), _split_cases(rows))


def compared_device_mix(*runs: pd.DataFrame) -> DeviceMix | None:
    """Runs compared with each other (``compare``, a history's series) whose rows were measured on different
    devices; None when every row names the same device, or no row names one (runs before ``device_id``)."""
    counts = _counts(runs)
    if len(counts) < 2:
        return None
    split = tuple(case for run in runs for case in _split_cases(run))
    return DeviceMix(DeviceCaveat.COMPARED_ACROSS_DEVICES, tuple(sorted(counts.items())), split)
