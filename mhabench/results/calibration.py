"""A machine's between-process calibration on disk: one JSON file per machine fingerprint.

``mhabench calibrate`` measures how far apart independent processes put the same ratio on this
machine (``mhabench.analysis.calibration``). ``advise`` and ``compare`` read it back for the
fingerprint of the run they are given (``mhabench.results.fingerprint``), so a torch upgrade or
another CPU model has no calibration until it is measured, instead of borrowing one. The files live in
``$MHABENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/mhabench``, else ``~/.cache/mhabench``: a cache of
this machine, not a result, so it stays out of ``results/``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from mhabench.errors import ResultsCorruptError
from mhabench.results.fingerprint import Fingerprint

CACHE_ENV = "MHABENCH_CACHE_DIR"


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The between-process spread of one machine: the figure, the ratios it came from and the run behind it."""

    fingerprint_key: str
    machine: str
    """``Fingerprint.describe()``: the machine in words."""
    between_process_spread: float
    """Median over the calibration's ratios of ``max / min − 1`` across its processes."""
    processes: int
    run_id: str
    run_path: str
    measured_at: str
    ratios: list[dict[str, Any]]
    """Per (case, implementation): each process's ratio to the baseline and their range."""

    def describe(self) -> str:
        """One line for people: the spread, how it was measured, on what."""
        return (
            f"between-process spread {self.between_process_spread:.1%} (median over {len(self.ratios)} ratios "
            f"across {self.processes} processes), run {self.run_id}, {self.measured_at}; machine "
            f"{self.fingerprint_key}: {self.machine}"
        )


def cache_dir() -> Path:
    """Where calibrations are kept (see the module docstring for the order the locations are tried in)."""
    if chosen := os.environ.get(CACHE_ENV):
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mhabench"


def calibration_path(fingerprint: Fingerprint) -> Path:
    return cache_dir() / f"calibration-{fingerprint.key}.json"


def save_calibration(calibration: Calibration) -> Path:
    """Write (or replace) the machine's calibration; the path it went to."""
    path = cache_dir() / f"calibration-{calibration.fingerprint_key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(calibration), indent=2) + "\n")
    return path


def load_calibration(fingerprint: Fingerprint) -> Calibration | None:
    """The calibration measured on ``fingerprint``'s machine, None when there is none."""
    path = calibration_path(fingerprint)
    if not path.exists():
        return None
    try:
        return Calibration(**json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        raise ResultsCorruptError(f"{path}: not a calibration ({exc}); run mhabench calibrate again") from None
