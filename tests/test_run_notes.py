"""The lines under the run's table: torch's expected messages each once, rows above a measured roof, the legend."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pandas as pd
from shared_runs import recorded
from synthetic_runs import row

from mhabench.measure.torch_messages import as_note, messages_of
from mhabench.results.store import load_run
from mhabench.views.run_notes import above_roof_lines, note_lines

FINDINGS_RUNS = Path(__file__).resolve().parents[1] / "docs" / "findings" / "runs"


def test_a_note_keeps_each_message_once_and_drops_bare_headers() -> None:
    messages = [
        "Flash attention kernel not used because:",
        "Nested tensors are not supported.",
        "Nested tensors are not supported.",
    ]
    note = as_note(messages)
    assert note == "torch: Nested tensors are not supported."
    assert messages_of(note) == ["Nested tensors are not supported."]
    assert as_note([]) == ""


def test_the_same_message_on_many_rows_is_printed_once_with_its_rows() -> None:
    shared = "torch: Nested tensors are not supported. We recommend …"
    rows = pd.DataFrame(
        {
            "impl": ["sdpa_nested", "sdpa_nested", "naive"],
            "note": [shared, as_note(["Nested tensors are not supported. We recommend …", "other"]), None],
        }
    )
    assert note_lines(rows) == [
        "torch said (sdpa_nested, 2 rows): Nested tensors are not supported. …",
        "torch said (sdpa_nested, 1 row): other",
    ]
    assert note_lines(rows.drop(columns="note")) == []


def test_a_row_above_a_measured_roof_is_named_once_with_why_on_a_stored_loaded_run(tmp_path: Path) -> None:
    """The loaded-VM default run of default-run.md: its first process probed the roof while the VM was busy, and
    `fused` at n = 2048 then ran at 145.7 % of it."""
    with tarfile.open(FINDINGS_RUNS / "20261127T113344Z-default.tar.xz") as archive:
        archive.extractall(tmp_path, filter="data")
    (line,) = above_roof_lines(load_run(tmp_path / "20261127T113344Z-default").frame)
    assert line.startswith("above the measured roof: `fused` at n=2048 h=8 d=512 b=1 float32 (145.7%): ")
    assert "probe ran slow" in line


def test_only_a_measured_roof_is_doubted_and_only_above_100_percent() -> None:
    fast, slow = row("fused", [1e-6] * 5), row("naive", [1e3] * 5)  # 1 ns beats any roof; 1 s none
    measured = pd.DataFrame([fast, slow]).assign(roofline_source="measured")
    assert len(above_roof_lines(measured)) == 1 and "`fused`" in above_roof_lines(measured)[0]
    assert above_roof_lines(measured.assign(roofline_source="datasheet (H100 SXM)")) == []
    assert above_roof_lines(pd.DataFrame([slow]).assign(roofline_source="measured")) == []


def test_the_recorded_h100_runs_against_their_datasheet_roof_get_no_above_roof_line() -> None:
    for name in ("20261126T070612Z-default-gpu", "20261127T074353Z-default-gpu-counters-partial"):
        assert above_roof_lines(load_run(recorded(name)).frame) == []
