"""The history store: appends are whole or absent, even with two writers at once or a kill mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mhabench.errors import InputError
from mhabench.history import store
from mhabench.history.points import RowRecord, RunRecord
from mhabench.results.fingerprint import Fingerprint

ROOT = Path(__file__).resolve().parents[1]

RECORDS = textwrap.dedent(
    """
    import math, sys, time
    from pathlib import Path
    from mhabench.history import store
    from mhabench.history.points import RowRecord, RunRecord
    from mhabench.results.fingerprint import Fingerprint

    def run(run_id):
        return RunRecord(run_id, "2026-01-01T00:00:00", "complete", "naive", Fingerprint.of({"torch": "2.13"}), "{}")

    def row(run_id, index):
        return RowRecord(run_id, f"case/{index}", f"case {index}", "my_attention", 0, "ok", "abc", 1, False, None,
                         1.0, 0.9, 1.1, 1.0, 0.9, 1.1, 1.0, 0.9, 1.1, math.nan, math.nan)

    def rows(run_id, count, pause_after, flag, pause_s):
        for index in range(count):
            if index == pause_after:
                Path(flag).touch()  # mid-transaction: some rows inserted, the commit not yet made
                time.sleep(pause_s)
            yield row(run_id, index)
    """
)


def run_record(run_id: str) -> RunRecord:
    return RunRecord(run_id, "2026-01-01T00:00:00", "complete", "naive", Fingerprint.of({"torch": "2.13"}), "{}")


def row_record(run_id: str, index: int) -> RowRecord:
    nan = float("nan")
    metrics = dict.fromkeys(RowRecord.__dataclass_fields__, 1.0)
    return RowRecord(
        **{
            **metrics,
            **{"run_id": run_id, "case_id": f"case/{index}", "case": f"case {index}", "impl": "my_attention"},
            **{"repeat": 0, "status": "ok", "commit": "abc", "commit_time": 1, "dirty": False, "repo": None},
            **{"measured_bytes": nan, "energy_per_call_j": nan},
        }
    )


def writer(directory: Path, run_id: str, count: int, pause_after: int, flag: Path, pause_s: float) -> subprocess.Popen:
    """A child process that appends ``count`` rows and pauses mid-transaction after ``pause_after`` of them."""
    code = RECORDS + (
        f"store.append(Path({str(directory)!r}), run({run_id!r}), "
        f"rows({run_id!r}, {count}, {pause_after}, {str(flag)!r}, {pause_s}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)


def wait_for(flag: Path, process: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not flag.exists():
        if process.poll() is not None:
            raise AssertionError(f"writer exited early: {process.stderr.read() if process.stderr else ''}")
        assert time.monotonic() < deadline, "the writer never reached the middle of its append"
        time.sleep(0.02)


def test_an_append_is_read_back_and_a_second_append_of_the_same_run_adds_nothing(tmp_path: Path) -> None:
    assert store.append(tmp_path, run_record("r1"), [row_record("r1", i) for i in range(3)]) == 3
    assert store.append(tmp_path, run_record("r1"), [row_record("r1", i) for i in range(3)]) == 0
    runs, rows = store.read(tmp_path)
    assert list(runs["run_id"]) == ["r1"]
    assert len(rows) == 3 and set(rows["fingerprint_key"]) == {Fingerprint.of({"torch": "2.13"}).key}
    assert rows["energy_per_call_j"].isna().all()  # NaN is stored as NULL and read back as missing


def test_reading_a_folder_without_a_store_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no store in"):
        store.read(tmp_path / "nothing")


def test_two_runs_appending_at_once_both_land_whole(tmp_path: Path) -> None:
    history = tmp_path / "history"
    first = writer(history, "first", 20, 5, tmp_path / "first.flag", 1.5)
    wait_for(tmp_path / "first.flag", first)  # the first holds the write lock now
    second = writer(history, "second", 20, 10, tmp_path / "second.flag", 0.0)
    assert first.wait(60) == 0 and second.wait(60) == 0, (first.stderr.read(), second.stderr.read())
    runs, rows = store.read(history)
    assert sorted(runs["run_id"]) == ["first", "second"]
    assert rows.groupby("run_id").size().to_dict() == {"first": 20, "second": 20}


def test_a_writer_killed_mid_append_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    history = tmp_path / "history"
    store.append(history, run_record("before"), [row_record("before", i) for i in range(4)])
    child = writer(history, "killed", 50, 20, tmp_path / "killed.flag", 60.0)
    wait_for(tmp_path / "killed.flag", child)
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(30) == -signal.SIGKILL
    runs, rows = store.read(history)
    assert list(runs["run_id"]) == ["before"] and len(rows) == 4  # none of the killed append, all of the one before
    assert store.append(history, run_record("killed"), [row_record("killed", i) for i in range(50)]) == 50
    assert len(store.read(history)[1]) == 54
