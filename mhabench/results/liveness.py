"""Is a run that says ``running`` still running? Process id, host and a heartbeat in the manifest.

A run killed by ``kill -9``, a power cut or the OOM killer never gets to write "interrupted": its
manifest says ``running`` forever. Readers (compare, report, ``--resume``) therefore ask
:func:`effective_status`, which checks the recorded process on this host, and trusts the heartbeat's
age for a run recorded on another host (a shared results folder).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import socket
from pathlib import Path
from typing import Any

from mhabench.results.manifest import Manifest, Status

STALE_AFTER_S = 1800.0
"""A heartbeat older than this (from another host) means the run is gone, unless the run's own config
allows a longer silence (:func:`longest_silence_s`). The writer refreshes it after every row."""
PROC = Path("/proc")


def liveness_fields() -> dict[str, Any]:
    """The manifest's liveness record: ``pid``, ``host``, ``pid_started`` (ticks since boot) and ``heartbeat``.

    ``pid_started`` tells a reused process id from the run's own process (Linux only; else None).
    """
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "pid_started": _start_ticks(pid), **heartbeat()}


def heartbeat(now: dt.datetime | None = None) -> dict[str, str]:
    """``{"heartbeat": ISO-8601 UTC time}``: merge it into the manifest after every row."""
    return {"heartbeat": (now or dt.datetime.now(dt.timezone.utc)).isoformat(timespec="seconds")}


def effective_status(manifest: Manifest, now: dt.datetime | None = None) -> Status | None:
    """The manifest's ``status``, except ``running`` becomes ``interrupted`` when its process is gone.

    Same host: the recorded pid no longer exists, or exists but started at another time (a reused
    pid). Another host: the heartbeat is older than :func:`longest_silence_s`. A manifest without
    liveness fields (written before they existed) cannot be judged and keeps its status.
    """
    if manifest.status != "running":
        return manifest.status
    if manifest.host == socket.gethostname() and manifest.pid is not None:
        return "running" if _same_process_alive(manifest.pid, manifest.pid_started) else "interrupted"
    age_s = _heartbeat_age_s(manifest.heartbeat, now or dt.datetime.now(dt.timezone.utc))
    return "interrupted" if age_s is not None and age_s > longest_silence_s(manifest) else "running"


def longest_silence_s(manifest: Manifest) -> float:
    """How long a live run may go without a heartbeat: :data:`STALE_AFTER_S`, or twice what its config lets
    one case take, whichever is longer.

    Rows of a case arrive together after its implementations are timed in shared rounds, so a case may
    take ``max_run_time_s`` per implementation (the timing cap; checks and warm-up fit in the factor
    two), or ``case_timeout_s`` when cases run in child processes.
    """
    config = manifest.config or {}
    timing = config.get("timing") if isinstance(config.get("timing"), dict) else {}
    names = manifest.implementations
    case_s = _number(timing.get("max_run_time_s")) * (len(names) if names is not None else 1)
    if config.get("isolation") == "process":
        case_s = max(case_s, _number(config.get("case_timeout_s")))
    return max(STALE_AFTER_S, 2 * case_s)


def _number(value: Any) -> float:
    """A finite non-negative number from a manifest, else 0 (a hand-edited manifest may hold anything)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        return 0.0
    return number if math.isfinite(number) and number > 0 else 0.0


def _same_process_alive(pid: int, started: int | None) -> bool:
    if pid <= 0:  # os.kill(0 or negative) would signal a whole process group
        return False
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except (ProcessLookupError, OverflowError):  # gone, or a pid no process can have
        return False
    except PermissionError:  # exists, owned by another user
        pass
    return started is None or _start_ticks(pid) in (None, started)


def _start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22 of /proc/PID/stat); None without /proc."""
    try:
        stat = (PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may itself contain spaces or ")"
    return int(stat.rsplit(")", 1)[1].split()[19])


def _heartbeat_age_s(heartbeat_text: str | None, now: dt.datetime) -> float | None:
    if heartbeat_text is None:
        return None
    try:
        beat = dt.datetime.fromisoformat(heartbeat_text)
    except ValueError:
        return None
    return (_as_utc(now) - _as_utc(beat)).total_seconds()


def _as_utc(moment: dt.datetime) -> dt.datetime:
    """A naive time is taken as UTC (the heartbeat is always written in UTC)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)
