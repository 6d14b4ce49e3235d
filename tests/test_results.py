"""The on-disk format: writing incrementally, reading back, resolving run references, safe names."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pytest

from mhabench.errors import ResultsCorruptError, RunNotFoundError
from mhabench.results import (
    COLUMNS,
    IDENTITY_COLUMNS,
    RunWriter,
    load_run,
    new_run_dir,
    resolve_run,
    sanitize_name,
)

NOW = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def row(impl: str, times_ms: list[float] | None = None, **metrics: Any) -> dict[str, Any]:
    identity = dict.fromkeys(IDENTITY_COLUMNS, "")
    identity.update(impl=impl, batch=1, seq_len=8, d_model=16, heads=2, causal=False, bias=False, status="ok")
    return {**identity, **metrics, **({"times_ms": times_ms} if times_ms is not None else {})}


def write_run(root: Path, name: str, rows: list[dict[str, Any]], now: dt.datetime = NOW) -> Path:
    writer = RunWriter(new_run_dir(root, name, now))
    writer.write_manifest({"run_id": writer.run_id, "status": "running"})
    for r in rows:
        writer.append(r)
    writer.write_manifest({"run_id": writer.run_id, "status": "complete", "roofline": {"float32": {"source": "x"}}})
    return writer.run_dir


def test_round_trip_keeps_rows_samples_and_manifest(tmp_path: Path) -> None:
    run_dir = write_run(
        tmp_path,
        "rt",
        [row("naive", [1.5, 1.25, 2.0], latency_ms=1.5, samples=3), row("fused", status="error", error="boom")],
    )
    run = load_run(run_dir)
    assert run.path == run_dir
    assert run.run_id == run_dir.name == "20250102T030405Z-rt"
    assert run.manifest == {"run_id": run.run_id, "status": "complete", "roofline": {"float32": {"source": "x"}}}
    assert list(run.rows.columns) == [*COLUMNS, "times_ms"]
    assert list(run.rows["impl"]) == ["naive", "fused"]
    assert run.rows["times_ms"][0] == [1.5, 1.25, 2.0]
    assert run.rows["times_ms"][1] == []
    assert run.rows["latency_ms"][0] == 1.5
    assert (run.rows["status"][1], run.rows["error"][1]) == ("error", "boom")


def test_csv_is_appended_row_by_row(tmp_path: Path) -> None:
    writer = RunWriter(new_run_dir(tmp_path, "inc", NOW))
    csv_path = writer.run_dir / "results.csv"
    assert csv_path.read_text(encoding="utf-8").splitlines() == [",".join(COLUMNS)]
    writer.append(row("naive", [1.0]))
    assert len(csv_path.read_text(encoding="utf-8").splitlines()) == 2
    assert "times_ms" not in csv_path.read_text(encoding="utf-8")  # raw samples live in the parquet only
    writer.append(row("fused", [2.0]))
    assert len(csv_path.read_text(encoding="utf-8").splitlines()) == 3


def test_writer_refuses_columns_outside_the_format(tmp_path: Path) -> None:
    writer = RunWriter(new_run_dir(tmp_path, "strict", NOW))
    with pytest.raises(ValueError, match="latency_seconds"):
        writer.append(row("naive", latency_seconds=1.0))


def test_csv_only_run_still_loads(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "csv", [row("naive", [1.0, 2.0])])
    (run_dir / "results.parquet").unlink()
    run = load_run(run_dir)
    assert list(run.rows["impl"]) == ["naive"]
    assert run.rows["times_ms"][0] == []


def test_resolve_latest_run_id_and_path(tmp_path: Path) -> None:
    older = write_run(tmp_path, "a", [row("naive")])
    newer = write_run(tmp_path, "b", [row("naive")], now=NOW - dt.timedelta(days=1))  # name sorts first
    os.utime(older / "manifest.json", (1_000_000, 1_000_000))
    (tmp_path / "not-a-run").mkdir()
    assert resolve_run("latest", tmp_path) == newer
    assert resolve_run(older.name, tmp_path) == older
    assert resolve_run(older, tmp_path) == older
    assert resolve_run(str(newer)) == newer
    assert load_run("latest", tmp_path).path == newer


def test_missing_runs_are_run_not_found(tmp_path: Path) -> None:
    with pytest.raises(RunNotFoundError, match="no runs under"):
        resolve_run("latest", tmp_path / "empty")
    with pytest.raises(RunNotFoundError, match="no such run folder or run id"):
        load_run("20990101T000000Z-none", tmp_path)
    (tmp_path / "plain").mkdir()
    with pytest.raises(RunNotFoundError, match="not an mhabench run folder"):
        load_run(tmp_path / "plain", tmp_path)


def test_corrupt_parquet_is_results_corrupt(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "bad", [row("naive", [1.0])])
    (run_dir / "results.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(ResultsCorruptError, match=r"results\.parquet: cannot read the results") as caught:
        load_run(run_dir)
    assert "\n" not in str(caught.value)


def test_corrupt_manifest_is_results_corrupt(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "bad", [row("naive")])
    (run_dir / "manifest.json").write_text("{ not json", encoding="utf-8")
    with pytest.raises(ResultsCorruptError, match=r"manifest\.json: cannot read the manifest"):
        load_run(run_dir)
    (run_dir / "manifest.json").write_text(json.dumps([1, 2]), encoding="utf-8")
    with pytest.raises(ResultsCorruptError, match="not a JSON object"):
        load_run(run_dir)


def test_foreign_table_is_results_corrupt(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "foreign", [row("naive")])
    (run_dir / "results.parquet").unlink()
    (run_dir / "results.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(ResultsCorruptError, match="not mhabench results"):
        load_run(run_dir)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("seq-sweep", "seq-sweep"), ("a/b", "a-b"), ("../../etc", "etc"), ("", "run"), ("..", "run"), ("x y", "x-y")],
)
def test_sanitize_name(name: str, expected: str) -> None:
    assert sanitize_name(name) == expected


@pytest.mark.parametrize("name", ["../../etc", "a/b", "", "/abs/path", "..\\..\\win", ".hidden", "x" * 300])
def test_run_dir_stays_inside_the_output_folder(tmp_path: Path, name: str) -> None:
    root = tmp_path / "results"
    run_dir = new_run_dir(root, name, NOW)
    assert run_dir.resolve().parent == root.resolve()
    assert run_dir.is_dir()
    assert not run_dir.name.startswith(".")
    assert len(run_dir.name) <= 100


def test_same_name_and_time_gets_a_suffix(tmp_path: Path) -> None:
    first = new_run_dir(tmp_path, "dup", NOW)
    second = new_run_dir(tmp_path, "dup", NOW)
    assert (first.name, second.name) == ("20250102T030405Z-dup", "20250102T030405Z-dup-1")
