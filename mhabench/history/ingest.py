"""Bringing runs into a history: right after ``mhabench run … --history DIR``, or ``history DIR --import RUN…``."""

from __future__ import annotations

from pathlib import Path

from mhabench.errors import InputError
from mhabench.history import store
from mhabench.history.points import row_records, run_baseline, run_record
from mhabench.results.store import Run, is_probe_run, load_run


def add_run(
    directory: Path,
    run_ref: str | Path,
    baseline: str | None = None,
    results_root: Path = Path("results"),
    strict_baseline: bool = True,
) -> tuple[str, int]:
    """Add one run folder's rows; (run id, rows added: 0 when the store already had the run).

    ``strict_baseline=False`` (``run --history``) lets a ``baseline`` the run lacks fall back to the default choice.
    """
    return add_held_run(directory, load_run(run_ref, results_root), baseline, strict_baseline)


def add_held_run(
    directory: Path, run: Run, baseline: str | None = None, strict_baseline: bool = True
) -> tuple[str, int]:
    """:func:`add_run` for a run the caller holds (``run --history``: the rows it just wrote, not read back)."""
    if is_probe_run(run.path):
        raise InputError(f"--import: {run.path} is a probe run: no results to keep")
    chosen = run_baseline(run, baseline, strict_baseline)
    return run.run_id, store.append(directory, run_record(run, chosen), row_records(run, chosen))
