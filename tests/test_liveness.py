"""Liveness: a manifest that says ``running`` whose process is gone reads as ``interrupted``."""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
from typing import Any

import pytest

from mhabench.results import liveness
from mhabench.results.liveness import STALE_AFTER_S, effective_status, heartbeat, liveness_fields

HOST = socket.gethostname()
NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
linux_only = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def running(**fields: Any) -> dict[str, Any]:
    return {"status": "running", **fields}


def test_fields_describe_this_process_now() -> None:
    fields = liveness_fields()
    assert (fields["pid"], fields["host"]) == (os.getpid(), HOST)
    beat = dt.datetime.fromisoformat(fields["heartbeat"])
    assert beat.tzinfo is not None
    assert abs((dt.datetime.now(dt.timezone.utc) - beat).total_seconds()) < 5
    assert effective_status(running(**fields)) == "running"


def test_heartbeat_is_iso_utc() -> None:
    assert heartbeat(NOW) == {"heartbeat": "2026-01-02T03:04:05+00:00"}


@pytest.mark.parametrize("status", ["complete", "interrupted", "failed"])
def test_finished_statuses_are_kept(status: str) -> None:
    assert effective_status({"status": status, "pid": dead_pid(), "host": HOST}) == status


def test_running_on_this_host_with_the_process_gone_is_interrupted() -> None:
    assert effective_status(running(pid=dead_pid(), host=HOST, heartbeat=NOW.isoformat()), now=NOW) == "interrupted"


@linux_only
def test_a_reused_pid_is_not_mistaken_for_the_run() -> None:
    fields = liveness_fields()
    assert isinstance(fields["pid_started"], int)
    assert effective_status(running(**fields)) == "running"
    assert effective_status(running(**{**fields, "pid_started": fields["pid_started"] - 1})) == "interrupted"


@pytest.mark.parametrize("pid", [0, -1, 10**30])
def test_impossible_pids_on_this_host_are_interrupted(pid: int) -> None:
    assert effective_status(running(pid=pid, host=HOST)) == "interrupted"


def test_another_host_is_judged_by_the_heartbeat_age() -> None:
    manifest = running(pid=dead_pid(), host=f"not-{HOST}", heartbeat=NOW.isoformat())
    fresh = NOW + dt.timedelta(seconds=STALE_AFTER_S - 1)
    stale = NOW + dt.timedelta(seconds=STALE_AFTER_S + 1)
    assert effective_status(manifest, now=fresh) == "running"
    assert effective_status(manifest, now=stale) == "interrupted"
    assert effective_status(manifest, now=stale.replace(tzinfo=None)) == "interrupted"  # naive = UTC


@pytest.mark.parametrize("manifest", [running(), running(host="elsewhere", heartbeat="not a time"), running(pid="12")])
def test_a_manifest_that_cannot_be_judged_keeps_running(manifest: dict[str, Any]) -> None:
    assert effective_status(manifest, now=NOW) == "running"


def test_start_ticks_survive_a_command_name_with_parentheses(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    (tmp_path / "42").mkdir()
    fields_after_name = " ".join(["S"] + [str(n) for n in range(4, 60)])  # field 22 is "22"
    (tmp_path / "42" / "stat").write_text(f"42 (odd) name (x)) {fields_after_name}\n", encoding="ascii")
    monkeypatch.setattr(liveness, "PROC", tmp_path)
    assert liveness._start_ticks(42) == 22
    assert liveness._start_ticks(43) is None


@pytest.mark.parametrize(
    ("extra", "silence_s"),
    [
        ({}, STALE_AFTER_S),
        ({"config": {"timing": {"max_run_time_s": 600.0}}, "implementations": ["a", "b", "c"]}, 3600.0),
        ({"config": {"isolation": "process", "case_timeout_s": 7200}}, 14400.0),
        ({"config": {"isolation": "inprocess", "case_timeout_s": 7200}}, STALE_AFTER_S),
        ({"config": {"timing": {"max_run_time_s": float("inf")}, "case_timeout_s": 10**400}}, STALE_AFTER_S),
        ({"config": ["not", "a", "mapping"], "implementations": "abc"}, STALE_AFTER_S),
    ],
)
def test_a_run_whose_cases_take_long_may_be_silent_longer(extra: dict[str, Any], silence_s: float) -> None:
    """Rows of a case arrive after all its implementations are timed: a long case is not a dead run."""
    manifest = running(pid=dead_pid(), host=f"not-{HOST}", heartbeat=NOW.isoformat(), **extra)
    assert liveness.longest_silence_s(manifest) == silence_s
    assert effective_status(manifest, now=NOW + dt.timedelta(seconds=silence_s - 1)) == "running"
    assert effective_status(manifest, now=NOW + dt.timedelta(seconds=silence_s + 1)) == "interrupted"
