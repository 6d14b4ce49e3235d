"""A run's answer on disk: ``answers.json`` in the run folder, written when the run ends.

It holds the record :mod:`mhabench.analysis.answer` computes (docs/advise.md describes it), including the
between-process calibration the answer was judged against, so that reading the folder later, on any machine and
under any ``HOME``, judges it against the same figure. A folder written before the file existed has none: readers
compute the answer again and say so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mhabench.errors import InputError, ResultsCorruptError
from mhabench.results.calibration import Calibration

ANSWERS_NAME = "answers.json"


def write_answers(run_dir: Path, record: dict[str, Any]) -> Path:
    """Write the record (JSON-ready, :meth:`RunAnswer.record`) into the run folder."""
    path = run_dir / ANSWERS_NAME
    path.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
    return path


def read_answers(run_dir: Path) -> dict[str, Any] | None:
    """The record kept in the run folder; None for a folder written before answers.json existed."""
    path = run_dir / ANSWERS_NAME
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text())
    except ValueError as exc:
        raise ResultsCorruptError(f"{path}: not JSON ({exc})") from None
    if not isinstance(found, dict):
        raise ResultsCorruptError(f"{path}: not a record (a JSON object)")
    return found


def recorded_calibration(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """The calibration a kept record was judged against (None: it had none)."""
    found = (record or {}).get("calibration")
    return found if isinstance(found, dict) else None


def read_calibration_file(path: Path) -> Calibration:
    """``--calibration FILE``: a calibration as ``mhabench calibrate`` writes it. A bad file is one line, exit 2."""
    try:
        data = json.loads(path.read_text())
        found = Calibration(**data)
    except FileNotFoundError:
        raise InputError(f"--calibration: {path} does not exist") from None
    except (ValueError, TypeError) as exc:
        raise InputError(f"--calibration: {path} is not a calibration file of mhabench calibrate ({exc})") from None
    if not math.isfinite(found.between_process_spread) or found.between_process_spread < 0:
        raise InputError(
            f"--calibration: {path}: between_process_spread {found.between_process_spread!r} is not a spread"
        )
    return found
