"""The result schema is the one source of the columns, the compare key and the column reference."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.results import columns, schema
from mhabench.results.column import ROLES
from mhabench.results.columns import columns_info

DOCS = Path(__file__).resolve().parents[1] / "docs" / "columns.md"


def test_every_column_has_a_unit_role_and_description() -> None:
    for info in columns_info():
        assert info.role in ROLES, info.name
        assert info.description and info.label, info.name
        if info.name.endswith("_ms"):
            assert info.unit == "ms", info.name
        if info.name.endswith("_bytes"):
            assert info.unit == "bytes", info.name


def test_columns_and_key_are_derived_from_the_fields() -> None:
    fields = [f.name for _, group in schema.GROUPS for f in dataclasses.fields(group)]
    assert [name for name in fields if name != columns.SAMPLES_COLUMN] == columns.COLUMNS
    assert len(set(fields)) == len(fields), "a column name is defined twice"
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
