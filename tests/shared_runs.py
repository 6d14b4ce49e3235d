"""Where the recorded GPU runs are: ``shared/runs`` inside the checkout or beside it.

On the development machine the worktrees sit beside ``shared/``; CI clones the repository fresh with ``shared/``
beside the clone. A test that reads a recorded run asks here, never for an absolute path, and skips with the
reason where the recording is not on the machine (a recorded GPU figure is never replaced by a made-up one).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_runs() -> Path | None:
    """The ``shared/runs`` folder inside the checkout or beside it; None where neither has one."""
    for base in (REPO_ROOT, REPO_ROOT.parent):
        runs = base / "shared" / "runs"
        if runs.is_dir():
            return runs
    return None


def recorded(name: str) -> Path:
    """``shared/runs/<name>`` (a run folder or a file in one), or a skip that names what is missing."""
    runs = shared_runs()
    if runs is None or not (runs / name).exists():
        pytest.skip(f"shared/runs/{name} is not on this machine (looked inside the checkout and beside it)")
    return runs / name
