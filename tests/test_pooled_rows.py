"""A replicated run's table: one pooled row per case and implementation, each process's rows on request."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from synthetic_runs import row, write_replicated_run
from typer.testing import CliRunner

from mhabench.analysis.advice.cases import cases_of
from mhabench.analysis.answer import Verdict, answer_run
from mhabench.analysis.estimate import across_processes, between_process_range
from mhabench.analysis.pooled_rows import PROCESSES, PROCESSES_OK, SPEEDUP_PROCESS_RANGE, middle_process, pooled_rows
from mhabench.analysis.speedup import speedup_rows
from mhabench.cli import app
from mhabench.results.store import load_run
from mhabench.views import pooled

cli = CliRunner()
PROCESSES_MS = [{"naive": 2.0, "fused": 1.0}, {"naive": 2.4, "fused": 1.1}, {"naive": 1.6, "fused": 0.9}]


@pytest.fixture
def replicated(tmp_path: Path) -> Path:
    return write_replicated_run(tmp_path / "runs", "replicated", PROCESSES_MS, seq_lens=(128, 512))


def test_one_pooled_row_per_case_and_implementation_read_across_the_processes(replicated: Path) -> None:
    speedups = speedup_rows(load_run(replicated).frame)
    found = pooled_rows(speedups)
    assert len(speedups) == 12 and len(found) == 4  # 2 cases × 2 implementations × 3 processes → 4
    for _, line in found.iterrows():
        mine = speedups[(speedups["case_id"] == line["case_id"]) & (speedups["impl"] == line["impl"])]
        estimate = across_processes(list(mine["speedup"]))
        assert (line["speedup"], line["speedup_ci_low"], line["speedup_ci_high"]) == pytest.approx(
            (estimate.ratio, estimate.ci_low, estimate.ci_high), nan_ok=True
        )
        assert line["latency_ms"] == pytest.approx(mine["latency_ms"].median())
        assert line[SPEEDUP_PROCESS_RANGE] == pytest.approx(between_process_range(list(mine["speedup"])))
        assert (line[PROCESSES_OK], line[PROCESSES]) == (3, 3)
    fused = found[found["impl"] == "fused"]
    # the processes' speedups were about 2.0, 2.2 and 1.8: their geometric mean, an interval that holds them
    assert fused["speedup"].between(1.9, 2.1).all() and (fused["speedup_ci_low"] < 1.85).all()
    record = answer_run(load_run(replicated))
    assert all(case.verdict is Verdict.WINNER and case.pick == "fused" for case in record.cases)
    for case in record.cases:  # the pick's speedup over the baseline: the pooled row's, one estimator
        (line,) = found[(found["case_id"] == case.case_id) & (found["impl"] == "fused")].to_dict("records")
        shown = case.impl("fused").vs_baseline
        assert shown.method == "replicates" and shown.processes == 3
        assert (shown.ratio, shown.ci_low, shown.ci_high) == pytest.approx(
            (line["speedup"], line["speedup_ci_low"], line["speedup_ci_high"])
        )


def test_a_row_ok_in_some_processes_says_so_and_one_ok_in_none_keeps_its_error(tmp_path: Path) -> None:
    run_dir = write_replicated_run(tmp_path / "runs", "r", PROCESSES_MS)
    rows = load_run(run_dir).frame
    broken = (rows["impl"] == "fused") & (rows["repeat"] == 1)
    failed = row("fused", [], status="error", error="boom", repeat=1)
    rows = pd.concat([rows[~broken], pd.DataFrame([failed])], ignore_index=True)
    table = pooled.pooled_table(speedup_rows(rows))
    status = dict(zip(table.records["impl"], [cells[-1] for cells in table.cells], strict=True))
    assert status == {"naive": "ok", "fused": "ok in 2 of 3 processes"}
    every_fused_failed = pd.concat(
        [rows[rows["impl"] != "fused"], pd.DataFrame([{**failed, "repeat": r} for r in range(3)])], ignore_index=True
    )
    table = pooled.pooled_table(speedup_rows(every_fused_failed))
    fused = list(table.records["impl"]).index("fused")
    assert table.cells[fused][-1] == "error: boom" and table.styles[fused] == "failed"


def test_the_wide_summary_of_a_replicated_run_is_the_pooled_table(replicated: Path) -> None:
    rows = load_run(replicated).frame
    table, note, *_ = pooled.wide_summary(rows, "naive", width=None)
    assert "pooled over 3 processes" in str(table.title) and table.row_count == 4
    assert "mhabench report RUN --replicate-rows" in str(note)


def test_report_pools_a_replicated_run_and_shows_each_process_only_on_request(replicated: Path, tmp_path: Path) -> None:
    pooled_md, detailed_md = tmp_path / "pooled", tmp_path / "detailed"
    for out, extra in ((pooled_md, []), (detailed_md, ["--replicate-rows"])):
        result = cli.invoke(app, ["report", str(replicated), "--format", "md", "--out", str(out), *extra])
        assert result.exit_code == 0, result.output
    short, long = ((out / "report.md").read_text() for out in (pooled_md, detailed_md))
    assert "pooled over 3 independent processes" in short and "## Each process's rows" not in short
    assert _table_rows(short, "### Scenario sweep\n") == 4
    assert "## Each process's rows" in long and _table_rows(long, "### Scenario sweep, each process\n") == 12


def test_a_run_of_one_process_keeps_its_table_of_every_row(tmp_path: Path) -> None:
    """One process (no ``replicates`` in the manifest): the report's table is the per-row one, no pooling."""
    run_dir = write_replicated_run(tmp_path / "runs", "one", PROCESSES_MS[:1], seq_lens=(128, 512))
    manifest = run_dir / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"replicates": 1', '"replicates": null'))
    result = cli.invoke(app, ["report", str(run_dir), "--format", "md", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out" / "report.md").read_text()
    assert "pooled over" not in text and "| processes |" not in text and _table_rows(text, "### Scenario sweep\n") == 4


def _table_rows(markdown: str, after: str) -> int:
    """Rows of the first Markdown table after the line ``after`` (header and rule not counted)."""
    lines = markdown.split(after, 1)[1].lstrip("\n").splitlines()
    table = [line for line in lines[: next(i for i, line in enumerate(lines) if not line.startswith("|"))]]
    return len(table) - 2


def test_the_latency_range_is_read_without_an_exponent() -> None:
    line = pd.Series({PROCESSES_OK: 3, "latency_process_min_ms": 1834.2, "latency_process_max_ms": 2391.7})
    assert pooled._latency_range(line) == "1834–2392"
    small = pd.Series({PROCESSES_OK: 3, "latency_process_min_ms": 0.07612, "latency_process_max_ms": 63.71})
    assert pooled._latency_range(small) == "0.0761–63.7"


def test_compare_on_one_replicated_run_pools_it_in_every_output(replicated: Path, tmp_path: Path) -> None:
    result = cli.invoke(app, ["compare", str(replicated), "--output", str(tmp_path / "speedups.md")])
    assert result.exit_code == 0, result.output
    assert "pooled over 3 processes" in result.output
    written = (tmp_path / "speedups.md").read_text()
    rows = [line for line in written.splitlines() if line.startswith("| n=")]
    assert len(rows) == 4 and all("| 3/3 |" in line for line in rows)  # 2 cases × 2 impls, not × 3 processes


def test_advise_quotes_the_process_row_a_replicated_runs_pooled_table_shows() -> None:
    """Three processes at 10, 30 and 20 ms: the pooled table shows the 20 ms process, and so do the rows advise's
    why rules quote; a one-process reading (``--repeat``) keeps the first repeat's."""
    records = [row("fused", [ms] * 5, repeat=index) for index, ms in enumerate([10.0, 30.0, 20.0])]
    records += [row("naive", [2 * ms] * 5, repeat=index) for index, ms in enumerate([10.0, 30.0, 20.0])]
    (pooled,) = cases_of("run", pd.DataFrame(records), across_processes=True)
    (repeated,) = cases_of("run", pd.DataFrame(records))
    assert [(r["impl"], r["latency_ms"], r["repeat"]) for r in pooled.rows] == [("fused", 20.0, 2), ("naive", 40.0, 2)]
    assert [r["repeat"] for r in repeated.rows] == [0, 0]
    assert middle_process([records[0]]) is not None and middle_process([]) is None
