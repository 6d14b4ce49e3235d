"""The line ``mhabench run`` ends with: its wall time, and how much of it was measuring.

Measuring is each process's span in the run's manifest (``started_at`` to ``finished_at``: the roofs, the
drift watch and the cases, every process of a replicated run added up); within it, the timed calls (the rows'
timed blocks) and the rest, per row: the tool's own work (warm-up, building, the checked and profiled calls,
writing the row). Everything else is the rest of the command's wall time: the interpreters' start-up and
imports, loading the config, merging the replicates and the answer after the run. Also the lines that say how
long a run will take: ``--dry-run``'s estimate and a replicated run's time left.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mhabench.results.manifest import Manifest
from mhabench.results.schema import ResultRow
from mhabench.run.estimate import MODELLED_EFFICIENCY, RunEstimate

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


def timed_calls_s(rows: Sequence[ResultRow]) -> float:
    """Seconds the rows' timed blocks took (each sample is a block's mean per-call time): the timing itself, without
    the warm-up."""
    return sum(sum(row.latency.times_ms) * row.latency.calls_per_sample / 1e3 for row in rows if row.latency)


def run_time_line(wall_s: float, spans_s: list[float], timed_s: float | None = None, rows: int = 0) -> str:
    """``wall time 28.1 s: measuring 19.0 s (3 processes: 6.2 + 6.4 + 6.4 s; timed calls 9.6 s, the rest 39 ms a
    row), everything else 9.1 s …``: with ``timed_s`` and the ``rows`` count, the tool's own work per row."""
    measuring_s = sum(spans_s)
    count = len(spans_s)
    each = f": {' + '.join(f'{span:.1f}' for span in spans_s)} s" if count > 1 else ""
    processes = f"{count} process{'es' if count > 1 else ''}{each}"
    if timed_s is not None and rows:
        rest_ms = (measuring_s - timed_s) / rows * 1e3
        processes += f"; timed calls {timed_s:.1f} s, the rest {rest_ms:.0f} ms a row"
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


def run_time(manifest: Manifest, rows: Sequence[ResultRow]) -> str:
    """The line for the run whose final manifest is ``manifest`` and whose rows are ``rows``, as of now."""
    return run_time_line(process_age_s(), measuring_spans_s(manifest), timed_calls_s(rows), len(rows))


def estimate_line(estimate: RunEstimate) -> str:
    """``--dry-run``'s last line: the estimated wall time, its parts, and where the per-call times came from."""
    rows = len(estimate.rows)
    rows_s = estimate.process_s - estimate.process_start_s
    each = f"{estimate.processes} processes × " if estimate.processes > 1 else ""
    parts = f"{each}(start-up {estimate.process_start_s:.1f} s + {rows} rows {rows_s:.1f} s)"
    if estimate.processes > 1:
        parts = f"their parent's start-up {estimate.parent_start_s:.0f} s, {parts}"
    if estimate.probe_s:
        parts += f", roof probe {estimate.probe_s:.0f} s"
    parts += f", answer {estimate.answer_s:.0f} s"
    sources = estimate.sources()
    said = {
        "history": "from earlier runs of the same cases",
        "modelled": f"modelled (cost model at {MODELLED_EFFICIENCY:.0%} of this machine's roofs)",
    }
    per_call = "; ".join(f"{count} rows {said[source]}" for source, count in sorted(sources.items()))
    return f"estimated run time: about {estimate.total_s:.0f} s ({parts}); per-call times: {per_call}. An estimate."
