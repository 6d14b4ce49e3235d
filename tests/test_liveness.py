"""Liveness and the run-folder lifecycle: ``running`` while a live process writes the folder, then
``complete``, ``interrupted`` or ``failed``; a ``running`` manifest whose process is gone reads as ``interrupted``."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from synthetic_runs import row

from mhabench.results import liveness
from mhabench.results.lifecycle import run_folder
from mhabench.results.liveness import STALE_AFTER_S, effective_status, heartbeat, liveness_fields
from mhabench.results.manifest import Manifest
from mhabench.results.schema import FORMAT_VERSION, ResultRow
from mhabench.results.store import CSV_NAME, MANIFEST_NAME, PARQUET_NAME, RunWriter, load_run

HOST = socket.gethostname()
NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
linux_only = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def running(**fields: Any) -> Manifest:
    return Manifest(status="running", **fields)


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
    assert effective_status(Manifest(status=status, pid=dead_pid(), host=HOST)) == status


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


@pytest.mark.parametrize("manifest", [running(), running(host="elsewhere", heartbeat="not a time"), running(host=HOST)])
def test_a_manifest_that_cannot_be_judged_keeps_running(manifest: Manifest) -> None:
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
        ({"config": {"timing": ["not", "a", "mapping"], "isolation": "process"}, "implementations": []}, STALE_AFTER_S),
    ],
)
def test_a_run_whose_cases_take_long_may_be_silent_longer(extra: dict[str, Any], silence_s: float) -> None:
    """Rows of a case arrive after all its implementations are timed: a long case is not a dead run."""
    manifest = running(pid=dead_pid(), host=f"not-{HOST}", heartbeat=NOW.isoformat(), **extra)
    assert liveness.longest_silence_s(manifest) == silence_s
    assert effective_status(manifest, now=NOW + dt.timedelta(seconds=silence_s - 1)) == "running"
    assert effective_status(manifest, now=NOW + dt.timedelta(seconds=silence_s + 1)) == "interrupted"


# --- the run-folder lifecycle ----------------------------------------------------------------------


def on_disk(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / MANIFEST_NAME).read_text(encoding="utf-8"))


def result_row(impl: str) -> ResultRow:
    return ResultRow.from_record(row(impl, [1.0, 2.0, 3.0]))


def test_a_run_folder_is_running_while_the_body_works_then_complete(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path)
    with run_folder(tmp_path, Manifest(command=["mhabench", "run"], cases=2), writer) as live:
        during = on_disk(tmp_path)
        assert (during["status"], during["finished_at"], during["run_id"]) == ("running", None, tmp_path.name)
        assert (during["format_version"], during["pid"], during["host"]) == (FORMAT_VERSION, os.getpid(), HOST)
        assert effective_status(Manifest.model_validate(during)) == "running"
        live.record(heartbeat="2000-01-01T00:00:00+00:00")
        writer.append(result_row("naive"))
        writer.append(result_row("fused"))
        writer.append(result_row("per_head"))  # the Parquet file now lags the CSV by one row
        assert on_disk(tmp_path)["heartbeat"] != "2000-01-01T00:00:00+00:00"  # every row refreshes the heartbeat
    after = on_disk(tmp_path)
    assert (after["status"], after["command"], after["cases"]) == ("complete", ["mhabench", "run"], 2)
    assert after["finished_at"] >= after["started_at"]
    assert {p.name for p in tmp_path.iterdir()} == {CSV_NAME, PARQUET_NAME, MANIFEST_NAME}
    assert len(load_run(tmp_path).frame) == 3 and all(load_run(tmp_path).frame["times_ms"].map(len))  # closed


@pytest.mark.parametrize(
    ("exc", "status"), [(KeyboardInterrupt(), "interrupted"), (SystemExit(1), "interrupted"), (OSError(28), "failed")]
)
def test_a_run_folder_stopped_by_an_exception_says_how_and_raises_it(
    tmp_path: Path, exc: BaseException, status: str
) -> None:
    writer = RunWriter(tmp_path)
    with pytest.raises(type(exc)), run_folder(tmp_path, Manifest(), writer):
        writer.append(result_row("naive"))
        raise exc
    after = on_disk(tmp_path)
    assert after["status"] == status and after["finished_at"] is not None
    assert load_run(tmp_path).manifest.status == status
    assert list(load_run(tmp_path).frame["impl"]) == ["naive"]  # the finished row is kept, its samples too


def test_a_resumed_start_is_kept_and_finished_as_applies_to_success_only(tmp_path: Path) -> None:
    started = "2026-01-01T00:00:00+00:00"
    with run_folder(tmp_path, Manifest(started_at=started, status="interrupted"), finished_as="interrupted"):
        assert on_disk(tmp_path)["status"] == "running"
    assert (on_disk(tmp_path)["started_at"], on_disk(tmp_path)["status"]) == (started, "interrupted")
    with pytest.raises(RuntimeError), run_folder(tmp_path, Manifest(), finished_as="interrupted"):
        raise RuntimeError("boom")
    assert on_disk(tmp_path)["status"] == "failed"


def test_a_status_outside_the_vocabulary_cannot_be_recorded(tmp_path: Path) -> None:
    with run_folder(tmp_path, Manifest()) as live, pytest.raises(ValueError, match="status"):
        live.record(status="incomplete-ish")


def test_the_heartbeat_is_written_when_it_changes_not_once_per_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It counts whole seconds: a run of small rows beats hundreds of times a second, and writes once a second."""
    from mhabench.results import lifecycle
    from mhabench.results.manifest import Manifest

    writes: list[dict[str, object]] = []
    monkeypatch.setattr(lifecycle, "write_manifest", lambda run_dir, manifest: writes.append(manifest))
    beats = iter(["2026-01-01T00:00:01+00:00"] * 3 + ["2026-01-01T00:00:02+00:00"])
    monkeypatch.setattr(lifecycle, "heartbeat", lambda: {"heartbeat": next(beats)})
    live = lifecycle.LiveRun(tmp_path, Manifest())
    for _ in range(4):
        live.beat()
    assert [manifest["heartbeat"] for manifest in writes] == ["2026-01-01T00:00:01+00:00", "2026-01-01T00:00:02+00:00"]
