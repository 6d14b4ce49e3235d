"""Waiting on a run in a child process: the tests that kill a run mid-way (resume, cluster drivers) share it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def wait_for_rows(child: subprocess.Popen[bytes], out: Path, rows: int, timeout_s: float = 180.0) -> Path:
    """The run folder once its CSV has at least ``rows`` complete rows (polled every few milliseconds); an
    AssertionError with the child's stderr when it ends first, and the child killed when the time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for csv_path in out.glob("*/results.csv"):
            if csv_path.read_bytes().count(b"\n") - 1 >= rows:
                return csv_path.parent
        if child.poll() is not None:
            stderr = child.stderr.read().decode() if child.stderr else ""
            raise AssertionError(f"the run ended before {rows} rows: {stderr[-2000:]}")
        time.sleep(0.005)
    child.kill()
    raise AssertionError(f"no {rows} rows after {timeout_s} s")
