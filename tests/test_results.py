"""The on-disk format: writing incrementally, reading back, format versions, run references, safe names."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shared_runs import recorded
from synthetic_runs import row as synthetic_row
from synthetic_runs import samples, sweep_rows
from typer.testing import CliRunner

from mhabench.analysis import compare
from mhabench.cli import app
from mhabench.errors import ResultsCorruptError, RunNotFoundError
from mhabench.results.columns import COLUMNS, SAMPLES_COLUMN
from mhabench.results.schema import FORMAT_VERSION, ResultRow
from mhabench.results.store import (
    RunWriter,
    load_run,
    new_run_dir,
    read_manifest,
    resolve_run,
    rows_frame,
    sanitize_name,
    write_manifest,
)

NOW = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
IDENTITY = {
    "run_id": "r",
    "scenario": "s",
    "case_id": "s/b1-n8-d16-h2-float32",
    "device": "cpu",
    "device_name": "Test CPU",
    "dtype": "float32",
    "batch": 1,
    "seq_len": 8,
    "d_model": 16,
    "heads": 2,
    "head_dim": 8,
    "kv_heads": 2,
    "mode": "forward",
    "phase": "prefill",
    "causal": False,
    "bias": False,
}


def row(impl: str, times_ms: list[float] | None = None, **metrics: Any) -> ResultRow:
    """A typed row from flat values: identity, ``status`` ok unless given, and whatever metrics are passed."""
    record = {**IDENTITY, "impl": impl, "status": "ok", "error": "", **metrics}
    return ResultRow.from_record({**record, **({SAMPLES_COLUMN: times_ms} if times_ms is not None else {})})


def write_run(
    root: Path, name: str, rows: list[ResultRow], now: dt.datetime = NOW, manifest: dict[str, Any] | None = None
) -> Path:
    writer = RunWriter(new_run_dir(root, name, now))
    write_manifest(writer.run_dir, {"run_id": writer.run_id, "status": "running"})
    for r in rows:
        writer.append(r)
    writer.close()
    write_manifest(
        writer.run_dir,
        manifest or {"run_id": writer.run_id, "status": "complete", "roofline": {"float32": {"source": "x"}}},
    )
    return writer.run_dir


def parquet_rows(run_dir: Path) -> int:
    return len(pd.read_parquet(run_dir / "results.parquet"))


def test_round_trip_keeps_rows_samples_and_manifest(tmp_path: Path) -> None:
    run_dir = write_run(
        tmp_path,
        "rt",
        [row("naive", [1.5, 1.25, 2.0], latency_ms=1.5, samples=3), row("fused", status="error", error="boom")],
    )
    run = load_run(run_dir)
    assert run.path == run_dir
    assert run.run_id == run_dir.name == "20250102T030405Z-rt"
    expected = {"run_id": run.run_id, "status": "complete", "roofline": {"float32": {"source": "x"}}}
    assert run.manifest.as_dict() == expected
    assert list(run.frame.columns) == [*COLUMNS, SAMPLES_COLUMN]
    assert list(run.frame["impl"]) == ["naive", "fused"]
    assert run.frame["times_ms"][0] == [1.5, 1.25, 2.0]
    assert run.frame["times_ms"][1] == []
    assert run.frame["latency_ms"][0] == 1.5
    assert (run.frame["status"][1], run.frame["error"][1]) == ("error", "boom")


def full_rows() -> list[ResultRow]:
    """Rows as the runner writes them: ok (every group), a failure (identity + outcome), a planned cost-only row."""
    ok = ResultRow.from_record(synthetic_row("fused", samples(2.0, 0.05, count=5)))
    ok_record = {**ok.record(), "sdpa_backend": "flash", "ops_per_call": 12, "params": 1024, "compile_time_s": 0.5}
    failed = ResultRow.from_record(synthetic_row("naive", [], status="oom", error="MemoryError"))
    planned = ResultRow.from_record({**synthetic_row("per_head", [], status="planned"), "flops": 10, "bytes_moved": 5})
    return [ResultRow.from_record(ok_record), failed, planned]


@pytest.mark.parametrize("source", ["parquet", "csv"])
def test_typed_rows_round_trip_through_the_run_folder(tmp_path: Path, source: str) -> None:
    """record() → disk → from_record() gives the rows back; a failure row stays identity + outcome only."""
    rows = full_rows()
    assert [r.latency is None for r in rows] == [False, True, True]
    run_dir = write_run(tmp_path, "typed", rows)
    if source == "csv":
        (run_dir / "results.parquet").unlink()
    back = load_run(run_dir).rows
    for original, loaded in zip(rows, back, strict=True):
        if source == "csv" and original.latency is not None:  # the CSV holds no raw samples
            assert loaded.latency is not None and loaded.latency.times_ms is None
            loaded = ResultRow.from_record({**loaded.record(), SAMPLES_COLUMN: list(original.latency.times_ms)})
        assert loaded == original
    failed = back[1]
    assert (failed.correctness, failed.latency, failed.memory, failed.cost, failed.roofline) == (None,) * 5
    assert back[2].cost is not None and back[2].cost.flops == 10 and back[2].latency is None


def test_record_and_frame_hold_every_column_of_the_format(tmp_path: Path) -> None:
    rows = full_rows()
    for r in rows:
        record = r.record()
        assert len(record) == len(COLUMNS) + 1 and set(record) == {*COLUMNS, SAMPLES_COLUMN}
    assert list(rows_frame(rows).columns) == [*COLUMNS, SAMPLES_COLUMN]
    run_dir = write_run(tmp_path, "cols", rows)
    lines = (run_dir / "results.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == ",".join(COLUMNS)
    assert len(lines) == 1 + len(rows)


def test_csv_is_appended_row_by_row(tmp_path: Path) -> None:
    writer = RunWriter(new_run_dir(tmp_path, "inc", NOW))
    csv_path = writer.run_dir / "results.csv"
    assert csv_path.read_text(encoding="utf-8").splitlines() == [",".join(COLUMNS)]
    writer.append(row("naive", [1.0]))
    assert len(csv_path.read_text(encoding="utf-8").splitlines()) == 2
    assert "times_ms" not in csv_path.read_text(encoding="utf-8")  # raw samples live in the parquet only
    writer.append(row("fused", [2.0]))
    assert len(csv_path.read_text(encoding="utf-8").splitlines()) == 3


def test_parquet_is_rewritten_at_powers_of_two_and_on_close(tmp_path: Path) -> None:
    """Linear total work: the Parquet file is rewritten after rows 1, 2, 4, 8, … and brought level on close."""
    writer = RunWriter(new_run_dir(tmp_path, "pow2", NOW))
    seen = []
    for index in range(6):
        writer.append(row(f"impl{index}", [float(index + 1)]))
        seen.append(parquet_rows(writer.run_dir))
    assert seen == [1, 2, 2, 4, 4, 4]
    writer.close()
    assert parquet_rows(writer.run_dir) == 6


@pytest.mark.filterwarnings("error::DeprecationWarning")  # pandas 4 turns them into errors
def test_killed_run_loads_every_csv_row_with_the_samples_the_parquet_had(tmp_path: Path) -> None:
    """A run killed after its third row (no close): the CSV has 3 rows, the Parquet file the first 2."""
    writer = RunWriter(new_run_dir(tmp_path, "killed", NOW))
    write_manifest(writer.run_dir, {"run_id": writer.run_id, "format_version": FORMAT_VERSION, "status": "running"})
    for impl, times in (("naive", [1.0, 2.0, 3.0]), ("per_head", [4.0]), ("fused", [5.0, 6.0])):
        writer.append(row(impl, times, latency_ms=sorted(times)[len(times) // 2], samples=len(times)))
    assert parquet_rows(writer.run_dir) == 2
    run = load_run(writer.run_dir)
    assert list(run.frame["impl"]) == ["naive", "per_head", "fused"]
    assert list(run.frame[SAMPLES_COLUMN]) == [[1.0, 2.0, 3.0], [4.0], []]
    assert list(run.frame["latency_ms"]) == [2.0, 4.0, 6.0]  # the third row's median comes from the CSV
    assert [r.latency.samples for r in run.rows if r.latency] == [3, 1, 2]


def test_a_newer_format_version_is_refused_in_one_line(tmp_path: Path) -> None:
    newer = FORMAT_VERSION + 1
    run_dir = write_run(tmp_path, "future", [row("naive", [1.0])], manifest={"run_id": "f", "format_version": newer})
    with pytest.raises(ResultsCorruptError, match=f"format version {newer}") as caught:
        load_run(run_dir)
    assert "\n" not in str(caught.value) and "upgrade mhabench" in str(caught.value)
    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and f"format version {newer}" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("version", ["2", None, 1.5])
def test_a_format_version_that_is_not_an_integer_is_refused(tmp_path: Path, version: object) -> None:
    run_dir = write_run(tmp_path, "odd", [row("naive", [1.0])], manifest={"run_id": "o", "format_version": version})
    with pytest.raises(ResultsCorruptError, match="format version"):
        load_run(run_dir)


def write_format_1_run(root: Path, name: str, rows: list[dict[str, Any]]) -> Path:
    """A run as mhabench wrote it before the schema: no ``format_version``, no ``ops_per_call`` column."""
    run_dir = write_run(root, name, [ResultRow.from_record(r) for r in rows], manifest={"run_id": name})
    old_columns = [c for c in COLUMNS if c != "ops_per_call"]
    frame = pd.read_parquet(run_dir / "results.parquet")
    frame[[*old_columns, SAMPLES_COLUMN]].to_parquet(run_dir / "results.parquet", index=False)
    pd.read_csv(run_dir / "results.csv")[old_columns].to_csv(run_dir / "results.csv", index=False)
    return run_dir


def test_a_run_without_format_version_loads_and_compares_with_a_new_one(tmp_path: Path) -> None:
    old = write_format_1_run(tmp_path, "old", sweep_rows())
    assert "format_version" not in json.loads((old / "manifest.json").read_text(encoding="utf-8"))
    run = load_run(old)
    assert len(run.rows) == len(sweep_rows())
    assert run.frame[SAMPLES_COLUMN][0] == sweep_rows()[0][SAMPLES_COLUMN]
    typed = run.rows
    assert typed[0].dispatch is None or typed[0].dispatch.ops_per_call is None
    assert typed[-1].status == "error" and typed[-1].latency is None
    new = write_run(tmp_path, "new", [ResultRow.from_record(r) for r in sweep_rows()])
    comparison = compare.compare_runs(run, load_run(new), 0.05)
    # the same samples: every row the same, except the noisy one, whose interval reaches past 5 % (~)
    assert set(comparison.rows["verdict"]) == {"same", "~", "not compared"}
    assert (comparison.rows["verdict"] == "~").sum() == 1
    for args in (["report", str(old)], ["compare", str(old)], ["compare", str(old), str(new)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (args, result.output)


@pytest.mark.filterwarnings("error::DeprecationWarning")  # pandas 4 turns them into errors
def test_csv_only_run_still_loads(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "csv", [row("naive", [1.0, 2.0])])
    (run_dir / "results.parquet").unlink()
    run = load_run(run_dir)
    assert list(run.frame["impl"]) == ["naive"]
    assert run.frame["times_ms"][0] == []


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


# --- reopening a killed run (run --resume) -------------------------------------------------------


def killed_run(root: Path, rows: list[ResultRow], tail: bytes = b"") -> Path:
    """A run killed after appending ``rows`` (no close), with ``tail`` half-written at the end of its CSV."""
    writer = RunWriter(new_run_dir(root, "killed", NOW))
    write_manifest(writer.run_dir, {"run_id": writer.run_id, "format_version": FORMAT_VERSION, "status": "running"})
    for r in rows:
        writer.append(r)
    with open(writer.run_dir / "results.csv", "ab") as handle:
        handle.write(tail)
    return writer.run_dir


def keys(rows: list[ResultRow]) -> list[tuple[str, str, int]]:
    return [(r.case.case_id, r.case.impl, r.case.repeat) for r in rows]


def keyed(impl: str, times_ms: list[float] | None = None, **metrics: Any) -> ResultRow:
    """A row with its ``repeat`` key, as the runner writes it."""
    return row(impl, times_ms, **{"repeat": 0, **metrics})


def test_reopen_keeps_finished_rows_and_appends_after_them(tmp_path: Path) -> None:
    """CSV: naive, per_head (error), fused, and half of a fourth line; Parquet: the first two rows only."""
    done = [keyed("naive", [1.0, 2.0], latency_ms=1.5, samples=2), keyed("per_head", status="error", error="boom")]
    lagging = keyed("fused", [3.0], latency_ms=3.0, samples=1)  # timed, but its samples never reached the Parquet
    run_dir = killed_run(tmp_path, [*done, lagging], tail=b"r,s,s/b1-n8-d16-h2-float32,torch_m")
    assert parquet_rows(run_dir) == 2
    (run_dir / "results.parquet.tmp").write_bytes(b"half a parquet file")

    writer = RunWriter.reopen(run_dir)
    assert keys(writer.rows) == keys(done)  # the lagging ok row is left out: resume measures it again
    assert [r.latency.times_ms if r.latency else None for r in writer.rows] == [(1.0, 2.0), None]
    assert not (run_dir / "results.parquet.tmp").exists()
    assert (run_dir / "results.csv").read_bytes().endswith(b"\r\n")
    assert list(load_run(run_dir).frame["impl"]) == ["naive", "per_head"]
    writer.append(lagging)
    writer.append(keyed("torch_mha", [4.0], latency_ms=4.0, samples=1))
    writer.close()
    run = load_run(run_dir)
    assert list(run.frame["impl"]) == ["naive", "per_head", "fused", "torch_mha"]
    assert list(run.frame[SAMPLES_COLUMN]) == [[1.0, 2.0], [], [3.0], [4.0]]


def test_reopen_after_a_kill_anywhere_in_the_last_line(tmp_path: Path) -> None:
    """A cut of the CSV's last line (a kill during its write: start, middle, before \\r, before \\n) loses that
    row and nothing else."""
    rows = [keyed("naive", status="error", error='a, "quoted" reason'), keyed("fused", status="unsupported", error="x")]
    full = (killed_run(tmp_path / "full", rows) / "results.csv").read_bytes()
    last_line_start = full.rindex(b"\n", 0, len(full) - 1) + 1
    middle = (last_line_start + len(full)) // 2
    for cut in (last_line_start, last_line_start + 1, middle, len(full) - 2, len(full) - 1, len(full)):
        run_dir = killed_run(tmp_path / str(cut), rows[:1], tail=full[last_line_start:cut])
        expected = rows if cut == len(full) else rows[:1]
        assert keys(RunWriter.reopen(run_dir).rows) == keys(expected), cut
        assert keys(load_run(run_dir).rows) == keys(expected), cut


def test_reopen_after_a_kill_inside_the_header(tmp_path: Path) -> None:
    run_dir = killed_run(tmp_path, [])
    (run_dir / "results.csv").write_bytes(",".join(COLUMNS[:5]).encode())
    writer = RunWriter.reopen(run_dir)
    assert writer.rows == []
    assert (run_dir / "results.csv").read_text(encoding="utf-8").splitlines() == [",".join(COLUMNS)]


def test_reopen_tells_repeats_apart_and_keeps_the_first_of_a_duplicate_key(tmp_path: Path) -> None:
    first, second = keyed("naive", [1.0], latency_ms=1.0, samples=1), keyed("naive", [2.0], latency_ms=2.0, samples=1)
    again = ResultRow.from_record({**second.record(), "repeat": 1})
    run_dir = killed_run(tmp_path, [first, again, second])
    writer = RunWriter.reopen(run_dir)
    assert keys(writer.rows) == [(IDENTITY["case_id"], "naive", 0), (IDENTITY["case_id"], "naive", 1)]
    assert [r.latency.times_ms for r in writer.rows if r.latency] == [(1.0,), (2.0,)]


def test_read_manifest_is_one_line_on_damage(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "m", [keyed("naive")])
    assert read_manifest(run_dir)["status"] == "complete"
    (run_dir / "manifest.json").write_text("[1]", encoding="utf-8")
    with pytest.raises(ResultsCorruptError, match="not a JSON object"):
        read_manifest(run_dir)
    (run_dir / "results.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(ResultsCorruptError, match="not mhabench results"):
        RunWriter.reopen(run_dir)


# --- the manifest: a closed status vocabulary, old folders still read ------------------------------

OLD_MANIFESTS: dict[str, dict[str, Any]] = {
    "a run with liveness, roofline and drift": {
        "run_id": "r",
        "format_version": 3,
        "command": ["mhabench", "run"],
        "config": {"name": "default-gpu", "timing": {"max_run_time_s": 0.1}},
        "environment": {"mhabench_version": "0.1.0", "device_kind": "cuda"},
        "roofline": {"bfloat16": {"peak_tflops": 989.0, "peak_gbps": 3350.0, "source": "datasheet:H100 SXM"}},
        "cases": 24,
        "implementations": ["naive", "fused"],
        "repeats": 1,
        "plugins": [],
        "started_at": "2026-11-26T07:06:12.238158+00:00",
        "finished_at": "2026-11-26T07:07:01.385464+00:00",
        "status": "complete",
        "pid": 452,
        "host": "vm",
        "pid_started": 2785,
        "heartbeat": "2026-11-26T07:06:12+00:00",
        "drift": {"reference_ms": [0.18, 0.18]},
    },
    "a probe run without a format version or liveness": {
        "kind": "probe",
        "run_id": "p",
        "command": ["mhabench", "probe"],
        "config": {"scenarios": [{"name": "t"}]},
        "environment": {},
        "cases": 1,
        "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": None,
        "status": "running",
    },
    "a forced merge, when merge wrote 'incomplete'": {
        "run_id": "m",
        "format_version": 3,
        "status": "incomplete",
        "merged_from": [{"run_id": "s0", "shard": "0/2"}],
        "forced": ["s1: shard 1/2 is 'interrupted', not 'complete'"],
    },
    "a run written before the schema": {"run_id": "old"},
}
OLD_STATUSES = {"complete": "complete", "running": "running", "incomplete": "interrupted"}


@pytest.mark.parametrize("name", list(OLD_MANIFESTS))
def test_manifests_as_older_mhabench_wrote_them_still_load(tmp_path: Path, name: str) -> None:
    """Every field is kept as written; only merge's old ``incomplete`` is read in today's vocabulary."""
    written = OLD_MANIFESTS[name]
    run = load_run(write_run(tmp_path, "old", [row("naive", [1.0])], manifest=written))
    expected = {**written, "status": OLD_STATUSES[written["status"]]} if "status" in written else written
    assert run.manifest.as_dict() == expected  # a probe run without liveness cannot be judged: it keeps "running"


def test_the_gpu_run_in_shared_runs_still_loads() -> None:
    """The real H100 run in shared/runs (beside the checkout or inside it), read by this mhabench."""
    run_dir = recorded("20261126T070612Z-default-gpu")
    run = load_run(run_dir)
    assert run.manifest.as_dict() == json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert run.manifest.status == "complete" and len(run.rows) == 96


@pytest.mark.parametrize("status", ["paused", "COMPLETE", "", 1, None])
def test_a_status_outside_the_vocabulary_is_refused_in_one_line(tmp_path: Path, status: object) -> None:
    manifest = {"run_id": "s", "format_version": FORMAT_VERSION, "status": status}
    run_dir = write_run(tmp_path, "odd", [row("naive", [1.0])], manifest=manifest)
    if status is None:  # written as null: no status recorded, like a manifest without the field
        assert load_run(run_dir).manifest.status is None
        return
    with pytest.raises(ResultsCorruptError, match=r"manifest\.json: status: ") as caught:
        load_run(run_dir)
    assert "\n" not in str(caught.value)
    assert all(repr(word) in str(caught.value) for word in ("running", "complete", "interrupted", "failed"))
    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "status" in result.stderr


@pytest.mark.parametrize(
    ("field", "value"), [("pid", "12"), ("host", 7), ("shard", {"index": 2, "count": 2}), ("repeats", 0)]
)
def test_a_typed_field_of_the_wrong_type_is_refused_in_one_line(tmp_path: Path, field: str, value: object) -> None:
    manifest = {"run_id": "t", "status": "complete", field: value}
    run_dir = write_run(tmp_path, "typed", [row("naive", [1.0])], manifest=manifest)
    with pytest.raises(ResultsCorruptError, match=rf"manifest\.json: {field}: ") as caught:
        load_run(run_dir)
    assert "\n" not in str(caught.value)
