"""The run summary: one line per case from the run's answer; the long table (--wide), repeats and spread."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
from rich.console import Console
from synthetic_runs import rounds, row, write_run

from mhabench.analysis import compare
from mhabench.analysis.answer import answer_run
from mhabench.analysis.speedup import speedup_rows
from mhabench.results.columns import label
from mhabench.results.store import load_run
from mhabench.views import summary as display
from mhabench.views.answer_table import answer_tables
from mhabench.views.compare import comparison_table
from mhabench.views.table import fit_columns, natural_width


def rendered(renderables: list) -> str:
    console = Console(file=io.StringIO(), width=250, color_system=None)
    for renderable in renderables:
        console.print(renderable)
    return console.file.getvalue()


def sweep(cases: int) -> list[dict]:
    """``cases`` cases of naive, per_head, fused in interleaved rounds; fused wins, except per_head at n=1."""
    rows = []
    for n in range(1, cases + 1):
        fused_ms = 9.0 if n == 1 else 4.0
        times = rounds({"naive": 10.0, "per_head": 8.0, "fused": fused_ms}, count=10, drift=0.2, seed=n)
        rows += [row(impl, ms, seq_len=n) for impl, ms in times.items()]
    return rows


def large_run() -> pd.DataFrame:
    """42 rows: above the threshold, with one oom and one error among them."""
    rows = sweep(14)
    rows[-1] = row("fused", [], seq_len=14, status="oom", error="out of memory")
    rows[-2] = row("per_head", [], seq_len=14, status="error", error="boom")
    return pd.DataFrame(rows)


def test_wide_prints_every_row() -> None:
    frame = pd.DataFrame(sweep(3))
    text = rendered(display.wide_summary(frame, "naive"))
    assert text.count("per_head") == 3 and "median of per-round ratios" in text


def test_a_large_run_prints_one_line_per_case_with_status_counts(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, "large", large_run().to_dict("records")))
    text = rendered(display.run_summary(answer_run(run), run.frame, tmp_path / "run"))
    lines = [line for line in text.splitlines() if "│ n=" in line]
    assert len(lines) == 14  # one per case, not one per row
    assert lines[0].rstrip(" │").endswith("per_head") and all(
        line.rstrip(" │").endswith("fused") for line in lines[1:13]
    )
    assert "oom" in lines[13] and "error" in lines[13]
    assert "rows not ok: oom 1, error 1" in text
    assert str(tmp_path / "run" / "results.csv") in text and f"mhabench report {tmp_path / 'run'}" in text


def test_rows_with_few_samples_show_n_a_rather_than_a_verdict(tmp_path: Path) -> None:
    """torch_mha spent its cap after 2 rounds: its IQR, noisy flag and interval read n/a and its status says so;
    fused, with 8 rounds, keeps all three. Read back from disk, where the empty noisy cell is NaN (``bool(nan)``
    is True: it must not read as noisy)."""
    times = rounds({"naive": 10.0, "fused": 4.0, "torch_mha": 100.0}, count=8, drift=0.02, seed=1)
    rows = [row(impl, ms) for impl, ms in times.items()]
    rows[2] = {**row("torch_mha", times["torch_mha"][:2]), "noisy": None, "capped": True}
    run = load_run(write_run(tmp_path, "few", rows))
    assert run.frame["noisy"].isna().tolist() == [False, False, True]
    table = display.results_table(speedup_rows(run.frame, "naive"), "naive")
    cells = {
        impl: dict(zip(table.headers, line, strict=True))
        for impl, line in zip(run.frame["impl"], table.cells, strict=True)
    }
    assert cells["torch_mha"]["status"] == "ok (capped, 2 samples)" and table.styles[2] == ""
    assert cells["torch_mha"]["median ms (IQR)"].endswith("(n/a)")
    assert cells["torch_mha"]["speedup vs naive"].endswith("× [n/a]")
    assert cells["fused"]["status"] == "ok" and "n/a" not in cells["fused"]["median ms (IQR)"]
    assert "n/a" not in cells["fused"]["speedup vs naive"]
    within = comparison_table(compare.speedups(run, "naive"))
    interval = [line[within.headers.index("95% CI")] for line in within.cells]
    assert interval[2] == "n/a" and interval[1].startswith("[")


def test_a_case_with_no_ok_row_has_no_pick(tmp_path: Path) -> None:
    rows = [row("naive", [], status="oom", seq_len=99), row("fused", [], status="oom", seq_len=99), *sweep(2)]
    run = load_run(write_run(tmp_path, "none", rows))
    (table,) = answer_tables(answer_run(run))
    assert table.cells[0][-1] == "nothing ran" and table.cells[0][1:-1] == ["oom", "oom", "-"]
    assert table.styles[0] == ""


def test_repeats_add_a_rep_and_a_spread_column() -> None:
    rows = [
        row(impl, [ms * (1 + rep / 10)] * 4, repeat=rep)
        for rep in range(3)
        for impl, ms in (("naive", 10.0), ("fused", 5.0 if rep else 4.0))
    ]
    table = display.results_table(speedup_rows(pd.DataFrame(rows), "naive"), "naive")
    assert "rep" in table.headers and "speedup spread" in table.headers
    spread = table.cells[1][table.headers.index("speedup spread")]  # fused: speedups 2.5, 2, 2
    assert spread == "25.0%"
    single = display.results_table(speedup_rows(pd.DataFrame(rows[:2]), "naive"), "naive")
    assert "rep" not in single.headers and "speedup spread" not in single.headers


def test_status_counts_follow_the_documented_order() -> None:
    counts = display.status_counts(["error", "ok", "crashed", "ok", "weird", "skipped"])
    assert list(counts.items()) == [("ok", 2), ("skipped", 1), ("error", 1), ("crashed", 1), ("weird", 1)]


def test_method_phrase_names_what_the_table_shows() -> None:
    assert display.method_phrase(["paired", ""]) == "median of per-round ratios"
    assert display.method_phrase(["medians"]) == "ratio of medians"
    assert "ratio of medians where rounds do not align" in display.method_phrase(["paired", "medians"])


def test_a_narrow_terminal_leaves_out_the_cost_columns_and_says_so() -> None:
    """Every cell wrapped into a few characters is unreadable: drop columns, cost columns first."""
    frame = pd.DataFrame(sweep(3))
    wide = display.results_table(speedup_rows(frame, "naive"), "naive")
    assert natural_width(wide) > 140
    narrow = fit_columns(wide, 140, display.DROPPABLE)
    assert natural_width(narrow) <= 140
    dropped = [h for h in display.DROPPABLE if h not in narrow.headers]
    assert dropped == list(display.DROPPABLE[: len(dropped)])  # first ones first
    assert set(wide.headers) - set(narrow.headers) == set(dropped)
    assert {"case", "impl", "median ms (IQR)", "speedup vs naive", "status"} <= set(narrow.headers)
    assert narrow.caption == f"not shown at 140 columns: {', '.join(dropped)} (every column: mhabench report)"
    assert all(len(cells) == len(narrow.headers) for cells in narrow.cells)
    assert fit_columns(wide, 400, display.DROPPABLE) == wide  # room for everything: unchanged, no caption
    text = rendered(display.wide_summary(frame, "naive", width=140))
    assert "not shown at 140 columns" in text and label("bytes_moved") not in text.split("\n")[2]
