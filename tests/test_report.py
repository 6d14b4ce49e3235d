"""``mhabench report``: files, every plot embedded, hostile strings escaped, skipped plots explained."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from synthetic_runs import HOSTILE, row, samples, sweep_report, write_run
from typer.testing import CliRunner

from mhabench import report, runner
from mhabench.cli import app
from mhabench.config import parse_config
from mhabench.results import load_run

cli = CliRunner()
EMBEDDED_PNG = '<img src="data:image/png;base64,'
__all__ = ["sweep_report"]  # the shared fixture, imported so pytest finds it
ALL_PLOTS = ("latency_vs_seq_len", "memory_vs_seq_len", "roofline", "speedup", "vs_heads")


def test_report_files_exist(sweep_report: Path) -> None:
    assert (sweep_report / "report.md").is_file() and (sweep_report / "report.html").is_file()
    assert sorted(p.stem for p in (sweep_report / report.PLOTS_DIR).glob("*.png")) == sorted(ALL_PLOTS)
    markdown = (sweep_report / "report.md").read_text()
    for name in ALL_PLOTS:
        assert f"]({report.PLOTS_DIR}/{name}.png)" in markdown


def test_html_embeds_every_plot_and_needs_no_network(sweep_report: Path) -> None:
    page = (sweep_report / "report.html").read_text()
    assert page.count(EMBEDDED_PNG) == len(ALL_PLOTS)
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "<script" not in page.replace("&lt;script", "")


def test_hostile_scenario_name_and_error_are_escaped(sweep_report: Path) -> None:
    page = (sweep_report / "report.html").read_text()
    assert HOSTILE not in page
    assert "Scenario &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "boom &lt;script&gt;" in page
    assert HOSTILE not in (sweep_report / "report.md").read_text()


def test_failed_and_noisy_rows_are_marked(sweep_report: Path) -> None:
    page = (sweep_report / "report.html").read_text()
    failed_section = page.split("<h2>Failed rows</h2>")[1].split("<h2>")[0]
    assert '<tr class="failed">' in failed_section and "error" in failed_section and "boom" in failed_section
    (noisy_row,) = re.findall(r'<tr class="noisy">.*?</tr>', page)
    assert "<td>per_head</td>" in noisy_row and "ok (noisy)" in noisy_row


def test_report_tables_have_the_issue_columns(sweep_report: Path) -> None:
    """Issue 3's per-scenario table: median ± IQR, speedup, memory, FLOPs, bytes, intensity, TFLOP/s,
    roofline efficiency, numerical error; the noisy flag is in the status cell."""
    page = (sweep_report / "report.html").read_text()
    for header in ("median ms (IQR)", "speedup vs naive", "peak mem", "FLOPs", "bytes", "FLOP/B", "TFLOP/s",
                   "roofline eff.", "rel err", "status"):  # fmt: skip
        assert f"<th>{header}</th>" in page, header
    assert "Test CPU" in page and "min_run_time_s: 0.2" in page  # environment and config


def test_plots_the_data_cannot_support_are_skipped_with_a_reason(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "one-size", [row("fused", samples(4, 0.01)), row("per_head", samples(5, 0.01))])
    written = report.write_report(load_run(run_dir), tmp_path / "out", report.parse_formats("html"))
    assert [p.name for p in written] == ["report.html"]
    page = written[0].read_text()
    assert page.count(EMBEDDED_PNG) == 1  # only the roofline: one seq_len, one heads value, no naive
    assert "needs at least two seq_len values" in page and "has no naive rows" in page
    assert "heads do not vary" in page


def test_report_baseline_is_a_setting(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "b", [row("naive", samples(10, 0.01)), row("fused", samples(4, 0.01))])
    result = cli.invoke(app, ["report", str(run_dir), "--format", "md", "--baseline", "fused"])
    assert result.exit_code == 0, result.output
    markdown = (run_dir / "report.md").read_text()
    assert "speedup vs fused" in markdown and "speedup vs naive" not in markdown
    assert "0.40×" in markdown  # naive against fused


def test_report_bad_input_exits_2(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "r", [row("fused", samples(4, 0.01))])
    for args in (["report", str(run_dir), "--format", "pdf"], ["report", str(tmp_path / "missing")]):
        result = cli.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_end_to_end_real_run_report(tmp_path: Path, tiny_config_data: dict[str, Any], fixed_peaks: object) -> None:
    """A tiny real ``runner.run`` (two seq_len) goes through the report: every measured row appears."""
    data = {**tiny_config_data, "implementations": ["naive", "fused"]}
    data["scenarios"] = [{"name": "e2e", "batch": 1, "seq_len": [8, 16], "d_model": 16, "heads": 2}]
    result = runner.run(parse_config(data, "test.yaml"), tmp_path)
    written = report.write_report(load_run(result.run_dir), result.run_dir, report.parse_formats("both"))
    page = written[1].read_text()
    assert page.count(EMBEDDED_PNG) == 4  # both seq plots, roofline, speedup; heads fixed → skipped
    assert page.count("<td>naive</td>") == 2 and page.count("<td>fused</td>") == 2
