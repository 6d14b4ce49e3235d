"""A machine's fingerprint: the facts of a run's environment that change its timings without changing its code.

Two runs are only comparable point by point when they ran on the same fingerprint: the same device
name and driver, the same torch, CUDA and cuDNN, the same CPU model and thread count. The history
store keys its series by it, and the between-process calibration is cached per fingerprint, so a
torch upgrade or a driver update starts new series and a new calibration instead of blending in.
The fingerprint is read from the manifest's ``environment`` entry, which every run writes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

FINGERPRINT_FIELDS = ("device_name", "driver_version", "torch", "cuda", "cudnn", "cpu_model", "threads")
"""The environment keys a fingerprint holds, in the order they are shown and hashed."""


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """The environment facts of one machine and software stack (None where the run did not record one)."""

    device_name: str | None
    driver_version: str | None
    torch: str | None
    cuda: str | None
    cudnn: str | None
    cpu_model: str | None
    threads: str | None

    @classmethod
    def of(cls, environment: Mapping[str, Any]) -> Fingerprint:
        """The fingerprint of a manifest's ``environment`` entry (values as text, missing ones None)."""
        return cls(**{name: _text(environment.get(name)) for name in FINGERPRINT_FIELDS})

    @property
    def key(self) -> str:
        """A short stable digest of the fields: equal fingerprints, equal keys."""
        payload = json.dumps(dataclasses.asdict(self), sort_keys=True).encode()
        return hashlib.sha256(payload).hexdigest()[:12]

    def differences(self, other: Fingerprint) -> dict[str, tuple[str | None, str | None]]:
        """Each field that differs, as (this value, the other value): what changed between two environments."""
        mine, theirs = dataclasses.asdict(self), dataclasses.asdict(other)
        return {name: (mine[name], theirs[name]) for name in FINGERPRINT_FIELDS if mine[name] != theirs[name]}

    def describe(self) -> str:
        """One line for people: the fields that were recorded, in order."""
        values = dataclasses.asdict(self)
        return ", ".join(f"{name} {values[name]}" for name in FINGERPRINT_FIELDS if values[name] is not None)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)
