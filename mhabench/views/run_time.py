"""The line ``mhabench run`` ends with: its wall time, and how much of it was measuring.

Measuring is each process's span in the run's manifest (``started_at`` to ``finished_at``: the roofs, the
drift watch and the cases, every process of a replicated run added up); everything else is the rest of the
command's wall time: the interpreters' start-up and imports, loading the config, merging the replicates and
the answer after the run.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path
from typing import Any

from mhabench.results.manifest import Manifest

IMPORTED_S = time.monotonic()
"""When this module was imported: the start where the process's own start time cannot be read (not Linux)."""


def measuring_spans_s(manifest: Manifest) -> list[float]:
    """Seconds each measuring process spent between its manifest's start and end (one per replicate, or the run's)."""
    processes: list[Any] = getattr(manifest, "replicated_from", None) or [manifest.as_dict()]
    return [_span_s(entry.get("started_at"), entry.get("finished_at")) for entry in processes]


def _span_s(started: str | None, finished: str | None) -> float:
    if not started or not finished:
        return 0.0
    return (dt.datetime.fromisoformat(finished) - dt.datetime.fromisoformat(started)).total_seconds()


def run_time_line(wall_s: float, spans_s: list[float]) -> str:
    """``wall time 28.1 s: measuring 19.0 s (3 processes: 6.2 + 6.4 + 6.4 s), everything else 9.1 s …``."""
    measuring_s = sum(spans_s)
    count = len(spans_s)
    each = f": {' + '.join(f'{span:.1f}' for span in spans_s)} s" if count > 1 else ""
    processes = f"{count} process{'es' if count > 1 else ''}{each}"
    other_s = max(0.0, wall_s - measuring_s)
    return (
        f"wall time {wall_s:.1f} s: measuring {measuring_s:.1f} s ({processes}), everything else {other_s:.1f} s "
        "(start-up and imports, merging, the answer)"
    )


def process_age_s(proc: Path = Path("/proc")) -> float:
    """Seconds since this process started (Linux: its start in clock ticks since boot, so the interpreter's
    start-up and imports count); elsewhere since this module was imported."""
    try:
        uptime_s = float((proc / "uptime").read_text().split()[0])
        # the fields after the command's closing parenthesis; starttime is the stat file's 22nd field
        fields = (proc / "self" / "stat").read_text().rsplit(")", 1)[1].split()
        return uptime_s - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic() - IMPORTED_S


def run_time(manifest: Manifest) -> str:
    """The line for the run whose final manifest is ``manifest``, as of now."""
    return run_time_line(process_age_s(), measuring_spans_s(manifest))
