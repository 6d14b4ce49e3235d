"""Whether a run folder holds a finished run: what a reader that compares runs must check first.

A run killed while it wrote ``results.csv`` leaves a last line without its end; a run stopped by Ctrl-C or a
failed case ends ``interrupted`` or ``failed``. ``compare`` refuses the first in one line (the rows on disk are
safe, ``run --resume`` finishes the run and its file) and says the second above its table, as ``advise`` and
``report`` do: the cases the run did not reach are missing from the comparison, not unchanged.
"""

from __future__ import annotations

from pathlib import Path

from mhabench.errors import ResultsCorruptError
from mhabench.results.store import CSV_NAME, Run


def cut_off(csv_path: Path) -> bool:
    """``results.csv`` ends inside a line: its writer was killed while writing it."""
    try:
        size = csv_path.stat().st_size
        if size == 0:
            return False
        with csv_path.open("rb") as handle:
            handle.seek(size - 1)
            return handle.read(1) != b"\n"
    except OSError:
        return False


def require_whole(run: Run) -> Run:
    """``run`` when its results file is whole; a one-line error naming ``run --resume`` when it was cut off."""
    if cut_off(run.path / CSV_NAME):
        raise ResultsCorruptError(
            f"{run.path / CSV_NAME}: half-written (its last line was cut off when the run was stopped); "
            f"finish it with `mhabench run --resume {run.path}`, then compare"
        )
    return run


def unfinished(run: Run) -> str | None:
    """The run's status when it did not complete (``interrupted``, ``failed`` or ``running``); None when it did."""
    status = run.manifest.status or "complete"
    return None if status == "complete" else status
