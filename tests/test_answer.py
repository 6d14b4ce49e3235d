"""The run's answer record: one verdict per case that every view reads, the exceptions it says, no hidden state."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from synthetic_runs import ENVIRONMENT, calibrate_test_machine, rounds, row, write_run
from typer.testing import CliRunner

from mhabench.analysis import answer, compare
from mhabench.analysis.advice.advise import advise
from mhabench.analysis.advice.pick import DOMINANCE
from mhabench.analysis.answer import Standing, Verdict, answer_run
from mhabench.analysis.case_drift import CaseDrift
from mhabench.analysis.explain import explain as explaining
from mhabench.answers_on_disk import answer_at_end
from mhabench.cli import app
from mhabench.results.answers import ANSWERS_NAME
from mhabench.results.store import load_run
from mhabench.views import summary
from mhabench.views.advice import to_terminal
from mhabench.views.answer_table import answer_tables
from mhabench.views.explain import sentence as explanation
from mhabench.views.run_notes import drift_line

ROOT = Path(__file__).resolve().parents[1]
cli = CliRunner()


def tie_run(tmp_path: Path) -> Path:
    """fused 2 % faster than naive, within the round-to-round noise: a tie, the interval including 1."""
    times = rounds({"naive": 1.02, "fused": 1.0, "per_head": 3.0}, count=20, drift=0.3, noise=0.03, seed=4)
    return write_run(tmp_path, "tie", [row(impl, ms) for impl, ms in times.items()])


def test_a_tie_is_a_tie_in_every_view(tmp_path: Path) -> None:
    run = load_run(tie_run(tmp_path))
    record = answer_run(run)
    (case,) = record.cases
    assert case.verdict is Verdict.TIE and case.pick is None and set(case.tied) == {"fused", "naive"}
    assert case.impl("per_head").standing is Standing.SLOWER
    rows = compare.speedups(run, "naive").rows.set_index("impl")
    assert set(rows["pick"]) == {"tie", ""} and "winner" not in set(rows["pick"])  # compare stars no tie
    (table,) = answer_tables(record)
    assert "★" not in " ".join(table.cells[0]) and table.cells[0][-1] == "tie" and table.styles == [""]
    assert sum(cell.endswith(" =") for cell in table.cells[0]) == 2
    result = cli.invoke(app, ["compare", str(run.path)])
    assert result.exit_code == 0 and "★" not in result.output and "=" in result.output


def test_a_runs_answer_is_computed_once_per_run_and_holds_no_cycle(tmp_path: Path) -> None:
    """Every reader of one loaded run shares its cases and picks; a run read again is answered again; nothing kept
    refers back to the run, so dropping the last reference frees it without waiting for the garbage collector."""
    import gc
    import weakref

    from mhabench.analysis.advice.answers import answer as answer_of

    folder = tie_run(tmp_path)
    run = load_run(folder)
    first, second = answer_of(run), answer_of(run)
    assert first.cases is second.cases and first.picks is second.picks and first.run is run
    again = answer_of(load_run(folder))
    assert again.cases is not first.cases and again.picks == first.picks
    gone = weakref.ref(run)
    gc.disable()
    try:
        del run, first, second
        assert gone() is None
    finally:
        gc.enable()


def test_a_winner_is_marked_in_the_table_and_compare(tmp_path: Path) -> None:
    times = rounds({"naive": 3.0, "fused": 1.0}, count=20)
    run = load_run(write_run(tmp_path, "clear", [row(impl, ms) for impl, ms in times.items()]))
    record = answer_run(run)
    assert [(one.verdict, one.pick) for one in record.cases] == [(Verdict.WINNER, "fused")]
    (table,) = answer_tables(record)
    fused = table.headers.index("fused")
    assert table.cells[0][fused].endswith("★") and table.cells[0][-1] == "fused" and table.styles == ["winner"]
    assert compare.speedups(run, "naive").rows.set_index("impl").loc["fused", "pick"] == "winner"


def test_a_winner_by_dominance_says_the_exception(tmp_path: Path) -> None:
    """naive ran 5 rounds (no interval below 6), each one slower than fused's slowest: the dominance exception."""
    fused = [1.0, 1.01, 0.99, 1.02, 1.0, 1.01, 0.98, 1.0]
    naive = [2.1, 2.2, 2.0, 2.15, 2.05]
    run = load_run(write_run(tmp_path, "dominance", [row("naive", naive), row("fused", fused)]))
    (case,) = answer_run(run).cases
    assert case.verdict is Verdict.WINNER and case.pick == "fused" and not case.lead.has_interval
    assert case.reason.code == DOMINANCE and case.reason.numbers["slower"]["naive"]["rounds"] == 5
    printed = _text(to_terminal(advise([run])))
    assert "dominance exception" in printed and "fewer than 6 rounds" in printed
    assert "dominance" in (ROOT / "docs" / "advise.md").read_text()


def test_explain_breaks_down_a_slower_row_where_the_case_cannot_tell(tmp_path: Path) -> None:
    """fused (the fastest) has 5 rounds: no interval, no dominance, "cannot tell"; naive is 2× slower by its
    median, and explain says so rather than "nothing to explain"."""
    fused = [1.0, 1.01, 0.99, 1.02, 1.0]
    naive = [2.1, 2.2, 2.0, 2.15, 2.05]
    run = load_run(write_run(tmp_path, "unknown", [row("naive", naive), row("fused", fused)]))
    (case,) = answer_run(run).cases
    assert case.verdict is Verdict.CANNOT_TELL and case.impl("naive").standing is Standing.UNKNOWN
    (found,) = explaining.explain(run)
    assert found.impl == "naive" and "by its median" in explanation(found) and found.slower_by > 2


def test_explain_breaks_down_the_pick_when_asked(tmp_path: Path) -> None:
    times = rounds({"naive": 3.0, "fused": 1.0}, count=20)
    run = load_run(write_run(tmp_path, "clear", [row(impl, ms) for impl, ms in times.items()]))
    (found,) = explaining.explain(run, impls=("fused",))
    assert found.impl == "fused" and "the case's fastest" in explanation(found)
    result = cli.invoke(app, ["explain", str(run.path), "--impl", "fused"])
    assert result.exit_code == 0 and "nothing to explain" not in result.output


def test_explain_names_a_dtype_wider_than_the_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    times = rounds({"naive": 1.0, "wide": 3.0}, count=20)
    run = load_run(write_run(tmp_path, "wide", [row(impl, ms) for impl, ms in times.items()]))
    monkeypatch.setattr(answer, "compute_dtype", lambda impl: "float64" if impl == "wide" else None)
    (found,) = explaining.explain(run)
    said = explanation(found)
    assert "computes in float64, wider than the case's float32" in said and "about 2×" in said


def test_no_reason_cites_an_efficiency_above_its_roof(tmp_path: Path) -> None:
    times = rounds({"naive": 3.0, "fused": 1.0}, count=20)
    rows = [row(impl, ms) for impl, ms in times.items()]
    low = {"peak_tflops": 1e-6, "peak_gbps": 1e-3}  # a roof far below the work
    probed = load_run(
        write_run(tmp_path / "probed", "above", [{**one, **low, "roof_source": "probed"} for one in rows])
    )
    for one in answer_run(probed).cases[0].impls:  # a probed roof is raised to the work, never left below it
        assert one.why is not None and one.why.efficiency is not None and one.why.efficiency <= 1 + 1e-9
    sheet = [{**one, **low, "roof_source": "datasheet", "roofline_source": "datasheet"} for one in rows]
    run = load_run(write_run(tmp_path / "sheet", "above", sheet))
    for one in answer_run(run).cases[0].impls:  # a datasheet roof stays: no efficiency is quoted against it
        assert one.why is not None and one.why.roof_below_work and one.why.efficiency is None
    printed = _text(to_terminal(advise([run])))
    assert "a roof below the work, so no efficiency is quoted" in printed and "% of the attainable" not in printed


def test_the_drift_sentence_is_finished() -> None:
    line = drift_line(CaseDrift("n=128", "naive", 8, 0.3, (("fused", 4),)))
    assert line.endswith("since each pairs only the rounds both rows ran in")


def test_no_unopened_reference_is_cited() -> None:
    """pytorch/pytorch#126973 could not be found: no answer or page cites it."""
    for folder in ("mhabench", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md"):
                assert "126973" not in path.read_text(encoding="utf-8"), path


def test_the_record_is_written_at_the_end_with_the_calibration_and_advise_reads_it(tmp_path: Path) -> None:
    """No hidden state: the calibration is recorded with the run; advise prints the same under any cache."""
    times = rounds({"naive": 1.06, "fused": 1.0}, count=20, noise=0.001)
    run_dir = write_run(tmp_path, "close", [row(impl, ms) for impl, ms in times.items()])
    calibrate_test_machine(0.10)
    answer_at_end(load_run(run_dir))
    kept = json.loads((run_dir / ANSWERS_NAME).read_text())
    assert kept["calibration"]["between_process_spread"] == 0.10 and kept["calibration"]["source"] == "recorded"
    outputs = []
    for home in ("one", "two"):
        env = {"HOME": str(tmp_path / home), "MHABENCH_CACHE_DIR": str(tmp_path / home / "cache")}
        result = cli.invoke(app, ["advise", str(run_dir)], env=env)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert outputs[0] == outputs[1] and "may not replicate" in outputs[0]


def test_an_older_folder_is_answered_again_with_a_note_and_a_calibration_file_is_read(tmp_path: Path) -> None:
    times = rounds({"naive": 1.06, "fused": 1.0}, count=20, noise=0.001)
    run_dir = write_run(tmp_path, "old", [row(impl, ms) for impl, ms in times.items()])
    data = json.loads(cli.invoke(app, ["advise", str(run_dir), "--format", "json"]).output)
    assert data["notes"][0]["code"] == "recomputed" and data["calibration"] is None
    cache = calibrate_test_machine(0.10)
    file = tmp_path / "calibration.json"
    file.write_text(json.dumps(cache.__dict__))
    data = json.loads(cli.invoke(app, ["advise", str(run_dir), "--format", "json", "--calibration", str(file)]).output)
    assert data["calibration"]["source"] == "file" and "may_not_replicate" in {c["code"] for c in data["caveats"]}
    bad = cli.invoke(app, ["advise", str(run_dir), "--calibration", str(tmp_path / "none.json")])
    assert bad.exit_code == 2 and "--calibration" in bad.output and "Traceback" not in bad.output
    assert ENVIRONMENT  # the machine the calibration was written for


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_run_summary_fits_the_terminal(tmp_path: Path, width: int) -> None:
    """The default run's shape: 3 cases × 4 implementations in one group: every line within the width, and at 100
    columns and more each cell on one line with its interval."""
    rows = []
    for seq_len in (128, 512, 2048):
        times = rounds({"naive": 1.5, "per_head": 2.5, "fused": 1.0, "torch_mha": 1.4}, count=20, seed=seq_len)
        rows += [row(impl, ms, seq_len=seq_len) for impl, ms in times.items()]
    run = load_run(write_run(tmp_path, "default", rows))
    printed = _text(summary.run_summary(answer_run(run), run.frame, run.path, width), width)
    lines = printed.splitlines()
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    table_lines = [line for line in lines if re.match(r"^│ n=", line)]
    assert len(table_lines) == 3  # one line per case: no cell folded
    if width >= 100:
        assert all("[" in line and "★" in line for line in table_lines)
    assert len(lines) <= 20


def _text(renderables: list, width: int = 200) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    for renderable in renderables:
        console.print(renderable)
    return console.file.getvalue()


def test_several_runs_in_json_are_their_records_and_what_differs(tmp_path: Path) -> None:
    first, second = tie_run(tmp_path / "a"), tie_run(tmp_path / "b")
    result = cli.invoke(app, ["advise", str(first), str(second), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema_version"] == 2 and [run["cases"][0]["verdict"] for run in data["runs"]] == ["tie", "tie"]
    assert all({"code", "numbers", "scope"} == set(one) for one in data["across"])
