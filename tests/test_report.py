"""``mhabench report``: files, every plot embedded, hostile strings escaped, skipped plots explained."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from synthetic_runs import HOSTILE, row, samples, sweep_report, with_counts, write_probe_run, write_run
from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.errors import InputError
from mhabench.results.columns import COLUMNS, SAMPLES_COLUMN
from mhabench.results.store import load_run, require_results, resolve_run
from mhabench.run import runner
from mhabench.scenario.loading import parse_config
from mhabench.views.report import sections
from mhabench.views.report.files import parse_formats, write_report
from mhabench.views.report.markdown import PLOTS_DIR, to_markdown

cli = CliRunner()
EMBEDDED_PNG = '<img src="data:image/png;base64,'
__all__ = ["sweep_report"]  # the shared fixture, imported so pytest finds it
ALL_PLOTS = ("latency_vs_seq_len", "memory_vs_seq_len", "roofline", "speedup", "vs_heads")


def test_report_files_exist(sweep_report: Path) -> None:
    assert (sweep_report / "report.md").is_file() and (sweep_report / "report.html").is_file()
    assert sorted(p.stem for p in (sweep_report / PLOTS_DIR).glob("*.png")) == sorted(ALL_PLOTS)
    markdown = (sweep_report / "report.md").read_text()
    for name in ALL_PLOTS:
        assert f"]({PLOTS_DIR}/{name}.png)" in markdown


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
    """Issue 3's per-scenario table: median ± IQR, speedup, memory, bytes, intensity (useful FLOPs per byte),
    useful TFLOP/s, executed over useful FLOPs, roofline efficiency, numerical error; noisy is in the status cell."""
    page = (sweep_report / "report.html").read_text()
    for header in (
        "median ms (IQR)",
        "speedup vs naive",
        "peak mem",
        "bytes",
        "FLOP/B",
        "useful TFLOP/s",
        "executed ×",
        "roofline eff.",
        "rel err",
        "status",
    ):
        assert f"<th>{header}</th>" in page, header
    assert "Test CPU" in page and "min_run_time_s: 0.2" in page  # environment and config


def test_plots_the_data_cannot_support_are_skipped_with_a_reason(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "one-size", [row("fused", samples(4, 0.01)), row("per_head", samples(5, 0.01))])
    written = write_report(sections.build(load_run(run_dir)), tmp_path / "out", parse_formats("html"))
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
    written = write_report(sections.build(load_run(result.run_dir)), result.run_dir, parse_formats("both"))
    page = written[1].read_text()
    # both seq plots, roofline, speedup and one stage chart per case; heads fixed → skipped
    assert page.count(EMBEDDED_PNG) == 6 and page.count('alt="Stages: ') == 2
    assert page.count("<td>naive</td>") == 2 and page.count("<td>fused</td>") == 2


# --- sections: model disagreements, run-to-run spread, throughput columns ----------------------------


@pytest.fixture
def no_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sections under test without rendering plots (tests/test_plots.py covers those)."""
    monkeypatch.setattr(sections, "all_plots", lambda speedups, baseline: [])


def _markdown(tmp_path: Path, rows: list[dict[str, Any]]) -> str:
    return to_markdown(sections.build(load_run(write_run(tmp_path, "r", rows))))


def _section(markdown: str, heading: str) -> str:
    return markdown.split(f"\n## {heading}\n")[1].split("\n## ")[0].strip()


def _table_rows(section: str) -> list[list[str]]:
    lines = [line for line in section.splitlines() if line.startswith("| ")][1:]  # without the header
    return [[cell.strip() for cell in line.strip("| ").split(" | ")] for line in lines]


def test_model_disagreements_lists_rows_whose_counts_miss_the_model(tmp_path: Path, no_plots: None) -> None:
    rows = [
        with_counts(row("naive", samples(4, 0.01)), bytes_factor=2.0),
        with_counts(row("fused", samples(1, 0.01)), flops_factor=1.1),
    ]
    section = _section(_markdown(tmp_path, rows), "Model disagreements")
    assert section.startswith("1 row(s) whose FLOPs or bytes counted")
    (cells,) = _table_rows(section)  # fused is 10 % off: within the 25 % the model is allowed
    assert cells[1:] == ["naive", "8.39 M", "8.39 M", "384.0 KiB", "768.0 KiB", "21.3", "10.7", "100%"]


def test_model_disagreements_says_none_or_not_available(tmp_path: Path, no_plots: None) -> None:
    agreeing = [with_counts(row("naive", samples(4, 0.01))), with_counts(row("fused", samples(1, 0.01)), 1.2)]
    assert _section(_markdown(tmp_path / "a", agreeing), "Model disagreements").startswith("None: every counted row")
    uncounted = [row("naive", samples(4, 0.01))]
    assert _section(_markdown(tmp_path / "b", uncounted), "Model disagreements").startswith("Not available")


def test_run_to_run_spread_per_case_and_implementation(tmp_path: Path, no_plots: None) -> None:
    scales, impls = (1.0, 1.1, 0.9), (("naive", 4.0), ("fused", 1.0))
    rows = [row(impl, [ms * scale] * 12, repeat=repeat) for repeat, scale in enumerate(scales) for impl, ms in impls]
    section = _section(_markdown(tmp_path / "three", rows), "Run-to-run spread")
    assert section.startswith("3 repeats.")
    naive, fused = _table_rows(section)
    assert fused[1:] == ["fused", "3", "1.000 / 1.100 / 0.900", "1.000", "20.0%", "4.00×", "0.0%"]
    assert naive[1:3] == ["naive", "3"] and naive[6] == "1.00×"
    assert "## Run-to-run spread" not in _markdown(tmp_path / "one", rows[:2])


def test_useful_tflops_and_skipped_masked_work_in_the_scenario_table(tmp_path: Path, no_plots: None) -> None:
    rows = [
        {**row(impl, samples(ms, 0.01)), "causal": True, "skips_masked_work": impl == "fused"}
        for impl, ms in (("naive", 4.0), ("fused", 1.0))
    ]
    for one in rows:
        one["useful_flops"] = one["flops"] / 2  # causal: half the scores are masked
        if one["skips_masked_work"]:
            one["achieved_useful_tflops"] = one["useful_flops"] / (one["latency_ms"] / 1e3) / 1e12
    table = _section(_markdown(tmp_path, rows), "Results")
    header = table.splitlines()[2]
    assert "| useful TFLOP/s | executed × | skips masked | roofline eff. |" in header
    at = header.strip("| ").split(" | ").index("skips masked")
    assert [cells[at] for cells in _table_rows(table)] == ["no", "yes"]
    useful = [r["useful_flops"] / (r["latency_ms"] / 1e3) / 1e12 for r in rows]
    assert [cells[at - 2] for cells in _table_rows(table)] == [f"{rate:.3f}" for rate in useful]
    # executed over useful: naive computes the masked scores (2×), fused skips them (1×)
    assert [cells[at - 1] for cells in _table_rows(table)] == ["2.00", "1.00"]


def test_plain_runs_have_no_throughput_extras(sweep_report: Path) -> None:
    markdown = (sweep_report / "report.md").read_text()
    assert "skips masked" not in markdown
    assert "## Run-to-run spread" not in markdown and "Not available: no row has counted" in markdown


# --- probe runs --------------------------------------------------------------------------------------


def test_report_of_a_probe_run_starts_with_its_claims(tmp_path: Path) -> None:
    run_dir = write_probe_run(tmp_path, "probe")
    result = cli.invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    markdown = (run_dir / "report.md").read_text()
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings == ["## Claims", "## Environment", "## Configuration"]
    assert "2 claims: 1 PASS, 1 NO-GUARANTEE" in markdown and "No benchmark rows (a probe run)" in markdown
    assert "median ms" not in markdown and HOSTILE not in markdown
    page = (run_dir / "report.html").read_text()
    assert EMBEDDED_PNG not in page and "d_k too small &lt;script&gt;" in page


def test_report_of_a_probe_run_without_claims_or_of_a_run_without_rows(tmp_path: Path) -> None:
    unfinished = write_probe_run(tmp_path, "unfinished", claims=False)
    assert cli.invoke(app, ["report", str(unfinished), "--format", "md"]).exit_code == 0
    assert "## Claims\n\nNo claims.csv: the probe run stopped" in (unfinished / "report.md").read_text()
    empty = write_run(tmp_path, "empty", [])
    assert cli.invoke(app, ["report", str(empty), "--format", "md"]).exit_code == 0
    assert "No benchmark rows (run complete)" in (empty / "report.md").read_text()


def test_a_probe_run_loads_with_empty_rows_and_compare_refuses_it(tmp_path: Path) -> None:
    run_dir = write_probe_run(tmp_path, "probe")
    assert resolve_run("latest", tmp_path) == run_dir
    run = load_run(run_dir)
    assert run.frame.empty and list(run.frame.columns) == [*COLUMNS, SAMPLES_COLUMN]
    with pytest.raises(InputError, match=r"probe is a probe run: no results to compare$"):
        require_results(run)
    bench = load_run(write_run(tmp_path, "bench", [row("fused", samples(1, 0.01))]))
    assert require_results(bench) is bench
