"""The result schema is the one source of the columns, the compare key and the column reference."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pyarrow.parquet as pq
from synthetic_runs import row, samples, write_run
from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.results import columns, schema
from mhabench.results.column import ROLES
from mhabench.results.columns import columns_info
from mhabench.results.store import CSV_NAME, PARQUET_NAME

DOCS = Path(__file__).resolve().parents[1] / "docs" / "columns.md"


def test_every_column_has_a_unit_role_and_description() -> None:
    for info in columns_info():
        assert info.role in ROLES, info.name
        assert info.description and info.label, info.name
        if info.name.endswith("_ms"):
            assert info.unit == "ms", info.name
        if info.name.endswith("_bytes"):
            assert info.unit == "bytes", info.name


def test_the_files_a_run_writes_hold_exactly_the_declared_columns(tmp_path: Path) -> None:
    """What the writer puts on disk, read back from the files: the CSV header is ``COLUMNS`` and the Parquet file
    adds only the samples, so a field added to a group without a column (or a column no group declares) fails."""
    run_dir = write_run(tmp_path, "run", [row("fused", samples(1.0, 0.01))])
    with open(run_dir / CSV_NAME, encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    assert header == columns.COLUMNS
    assert len(set(header)) == len(header), "a column name is written twice"
    parquet = pq.read_schema(run_dir / PARQUET_NAME).names
    assert [name for name in parquet if name != columns.SAMPLES_COLUMN] == header
    assert columns.SAMPLES_COLUMN in parquet


def test_the_pinned_runs_columns_are_all_still_read() -> None:
    """A run written before this change (tests/data/pinned_run) keeps every column, in its order: renaming or
    dropping a column would orphan older runs' data. New columns may be added anywhere."""
    pinned = next((Path(__file__).parent / "data" / "pinned_run").glob("*/" + CSV_NAME))
    with open(pinned, encoding="utf-8") as handle:
        old_header = next(csv.reader(handle))
    assert [name for name in columns.COLUMNS if name in old_header] == old_header


def test_the_case_key_is_what_tells_measurements_apart() -> None:
    assert columns.CASE_KEY[:3] == ["impl", "device", "dtype"]
    assert {"seq_len", "heads", "kv_heads", "mode", "phase", "causal", "bias"} <= set(columns.CASE_KEY)
    assert "run_id" not in columns.CASE_KEY and "model" not in columns.CASE_KEY
    assert "head_dim" in columns.CASE_KEY  # set apart from d_model / heads, it makes another measurement


def test_measured_and_modelled_are_never_mixed_in_a_group() -> None:
    """A cost-model figure must never sit among measured figures (honest-numbers rule). Every group in GROUPS is
    checked, so a group added or changed later is held to it too."""
    roles_by_group = {
        group.__name__: {f.metadata["role"] for f in dataclasses.fields(group)} for _, group in schema.GROUPS
    }
    assert len(roles_by_group) == len(schema.GROUPS), "two groups share a class"
    mixed = {name: roles for name, roles in roles_by_group.items() if {"measured", "modelled"} <= roles}
    assert not mixed, f"measured and modelled columns share a group: {mixed}"
    # not vacuous: both roles exist, in separate groups
    assert any("modelled" in roles for roles in roles_by_group.values())
    assert any("measured" in roles for roles in roles_by_group.values())


def test_docs_column_reference_matches_the_schema() -> None:
    """docs/columns.md is generated: regenerate with `mhabench columns --markdown > docs/columns.md`."""
    result = CliRunner().invoke(app, ["columns", "--markdown"])
    assert result.exit_code == 0
    assert DOCS.read_text(encoding="utf-8") == result.output


def test_record_round_trip_keeps_groups_and_drops_missing_ones() -> None:
    shape = {"batch": 1, "seq_len": 8, "d_model": 16, "heads": 2, "head_dim": 8, "kv_heads": 2}
    names = {"run_id": "r", "scenario": "s", "case_id": "s/x", "impl": "fused", "device": "cpu", "device_name": "cpu"}
    case = schema.CaseIdentity(
        **names, **shape, dtype="float32", mode="forward", phase="prefill", causal=False, bias=False
    )
    latency = schema.LatencyStats.from_samples((1.0, 2.0, 3.0), 4, 0.1, compile_time_s=float("nan"))
    row = schema.ResultRow(case, schema.Outcome("ok", ""), schema.Correctness(1e-7, 2e-7), latency=latency)
    back = schema.ResultRow.from_record(row.record())
    assert back.case == case and back.correctness == row.correctness
    assert back.latency is not None and back.latency.latency_ms == 2.0 and back.latency.times_ms == (1.0, 2.0, 3.0)
    assert back.memory is None and back.cost is None and back.roofline is None


def test_a_status_word_becomes_its_enum_member_and_an_unknown_one_stays_text() -> None:
    row = schema.ResultRow.from_record({"impl": "fused", "status": "ok"})
    assert row.status is schema.RowStatus.OK and row.record()["status"] == "ok"
    newer = schema.ResultRow.from_record({"impl": "fused", "status": "quarantined"})
    assert newer.status == "quarantined" and not isinstance(newer.status, schema.RowStatus)
