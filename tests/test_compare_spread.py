"""``compare`` between two runs and the machine's between-process spread: a difference the machine makes
between its own processes is never faster or slower."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_runs import ENVIRONMENT, row, samples, write_run
from typer.testing import CliRunner

from mhabench.analysis import compare
from mhabench.analysis.verdict import RowNote
from mhabench.cli import app
from mhabench.results.calibration import Calibration, save_calibration
from mhabench.results.fingerprint import Fingerprint
from mhabench.results.store import load_run
from mhabench.views.machine import notes_text


def two_runs(tmp_path: Path, factor: float) -> tuple[Path, Path]:
    """Base and candidate with one tight fused row each: candidate median = ``factor`` × base median."""
    base = write_run(tmp_path, "base", [row("fused", samples(10.0, 0.005, seed=1))])
    candidate = write_run(tmp_path, "cand", [row("fused", samples(10.0 * factor, 0.005, seed=2))])
    return base, candidate


def calibrate_test_machine(spread: float) -> None:
    here = Fingerprint.of(ENVIRONMENT)
    save_calibration(Calibration(here.key, here.describe(), spread, 5, "cal", "cal", "now", []))


@pytest.mark.parametrize(
    ("factor", "spread", "verdict"), [(1.08, 0.0, "slower"), (1.08, 0.05, "~"), (1.2, 0.05, "slower")]
)
def test_a_change_within_the_between_process_spread_is_unclear(
    tmp_path: Path, factor: float, spread: float, verdict: str
) -> None:
    base, candidate = two_runs(tmp_path, factor)
    found = compare.compare_runs(load_run(base), load_run(candidate), 0.05, between_process_spread=spread)
    (line,) = found.rows.to_dict("records")
    assert line["verdict"] == verdict and found.between_process_spread == spread
    within = [note for note in line["notes"] if note.code is RowNote.WITHIN_SPREAD]
    assert bool(within) == (verdict == "~")
    assert ("between-process spread (5%)" in notes_text(line["notes"])) == (verdict == "~")


def test_the_machine_spread_is_the_calibration_of_the_runs_machine(tmp_path: Path) -> None:
    runs = [load_run(path) for path in two_runs(tmp_path, 1.0)]
    assert compare.machine_spread(runs) == 0.0
    calibrate_test_machine(0.04)
    assert compare.machine_spread(runs) == 0.04


def test_compare_widens_by_the_calibrated_spread_unless_told_otherwise(tmp_path: Path) -> None:
    base, candidate = (str(path) for path in two_runs(tmp_path, 1.08))
    assert "slower" in CliRunner().invoke(app, ["compare", base, candidate]).output
    calibrate_test_machine(0.05)
    widened = CliRunner().invoke(app, ["compare", base, candidate])
    assert widened.exit_code == 0 and "widened by the between-process spread 5.0%" in widened.output
    assert "slower" not in widened.output.replace("significantly slower", "")
    given = CliRunner().invoke(app, ["compare", base, candidate, "--process-spread", "0"])
    assert "slower" in given.output and "widened" not in given.output
    bad = CliRunner().invoke(app, ["compare", base, candidate, "--process-spread", "lots"])
    assert bad.exit_code == 2 and "--process-spread: 'lots'" in bad.output
