"""The machine calibration: its spread from a replicated run, its file per fingerprint, the advise caveat it
drives, and ``mhabench calibrate --show``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import torch
from synthetic_runs import ENVIRONMENT, rounds, row
from typer.testing import CliRunner

from mhabench.analysis.advice.answers import RunAnswers, answer
from mhabench.analysis.advice.caveats import MAY_NOT_REPLICATE, UNCALIBRATED, caveats
from mhabench.analysis.advice.pick import WINNER
from mhabench.analysis.calibration import calibration_config, calibration_of
from mhabench.analysis.statement import CAVEAT, Question, Statement
from mhabench.cli import app
from mhabench.errors import ResultsCorruptError
from mhabench.measure.environment import environment
from mhabench.results.calibration import Calibration, calibration_path, load_calibration, save_calibration
from mhabench.results.fingerprint import Fingerprint
from mhabench.results.manifest import Manifest
from mhabench.results.store import Run, typed_rows
from mhabench.views.wording import sentence as text_of


def replicated_run(speedups_by_process: list[dict[str, float]]) -> Run:
    """A run of ``len(speedups_by_process)`` replicates of one case; process i's implementations run
    ``speedups_by_process[i][impl]`` times faster than ``naive``."""
    records = []
    for index, speedups in enumerate(speedups_by_process):
        medians = {"naive": 1.0, **{impl: 1.0 / value for impl, value in speedups.items()}}
        times = rounds(medians, count=20, noise=0.001, seed=index)
        records += [row(impl, times[impl], repeat=index) for impl in medians]
    manifest = {"run_id": "cal", "environment": ENVIRONMENT, "replicates": len(speedups_by_process)}
    return Run(Path("cal"), Manifest.model_validate(manifest), typed_rows(pd.DataFrame(records)))


def calibration(spread: float, fingerprint: Fingerprint) -> Calibration:
    return Calibration(fingerprint.key, fingerprint.describe(), spread, 5, "cal-run", "results/cal-run", "now", [])


def test_the_spread_is_the_median_over_ratios_of_their_range_across_processes() -> None:
    run = replicated_run(
        [{"fused": 2.0, "per_head": 0.5}, {"fused": 2.2, "per_head": 0.5}, {"fused": 2.1, "per_head": 0.6}]
    )
    found = calibration_of(run)
    ranges = {entry["impl"]: entry["range"] for entry in found.ratios}
    assert ranges == pytest.approx({"fused": 0.1, "per_head": 0.2}, rel=0.02)
    assert found.between_process_spread == pytest.approx(0.15, rel=0.02)
    assert (found.processes, found.run_id) == (3, "cal")
    assert found.fingerprint_key == Fingerprint.of(ENVIRONMENT).key and "Test CPU" in found.machine


def test_a_calibration_is_stored_per_fingerprint_and_read_back(empty_calibration_cache: Path) -> None:
    here, other = Fingerprint.of(ENVIRONMENT), Fingerprint.of({**ENVIRONMENT, "torch": "2.14.0"})
    path = save_calibration(calibration(0.05, here))
    assert path == calibration_path(here) and path.parent == empty_calibration_cache
    assert load_calibration(here) == calibration(0.05, here)
    assert load_calibration(other) is None  # a torch upgrade needs its own calibration
    path.write_text("{not json")
    with pytest.raises(ResultsCorruptError, match="run mhabench calibrate again"):
        load_calibration(here)


def one_process_run(leads: dict[int, float]) -> Run:
    """One process, one case per seq_len: ``fused`` faster than ``naive`` by ``leads[seq_len]``."""
    records = []
    for seq_len, lead in leads.items():
        times = rounds({"naive": lead, "fused": 1.0}, count=20, noise=0.002, seed=seq_len)
        records += [row(impl, times[impl], seq_len=seq_len) for impl in ("naive", "fused")]
    return Run(
        Path("one"),
        Manifest.model_validate({"run_id": "one", "environment": ENVIRONMENT}),
        typed_rows(pd.DataFrame(records)),
    )


ONE_PROCESS_RULES = {MAY_NOT_REPLICATE, UNCALIBRATED, "one_process"}
"""Every rule name a caveat on one process's picks has had: the merged rule makes at most one statement."""


def one_process_caveats(answers: RunAnswers) -> list[Statement]:
    """The run's caveats about whether its picks replicate (all of them, so a second sentence would show)."""
    run = answers.run
    recorded = load_calibration(Fingerprint.of(ENVIRONMENT))  # what the run records as it ends (answers.json)
    spread = (recorded.between_process_spread, recorded.run_id) if recorded is not None else None
    found = caveats(run.run_id, run.manifest, answers.cases, answers.picks, Question(), spread)
    assert all(statement.kind == CAVEAT for statement in found)
    return [statement for statement in found if statement.rule in ONE_PROCESS_RULES]


def test_a_winner_whose_lead_is_within_the_machine_spread_may_not_replicate() -> None:
    save_calibration(calibration(0.10, Fingerprint.of(ENVIRONMENT)))
    answers = answer(one_process_run({128: 1.06, 512: 1.5}))
    (found,) = one_process_caveats(answers)
    assert found.rule == MAY_NOT_REPLICATE and found.figures["between_process_spread"] == 0.10
    said = text_of(found)
    assert "n=128" in said and "n=512" not in said and "10 %" in said and "cal-run" in said
    assert found.figures["picks"] == 1 and found.figures["named"][0]["impls"] == ["fused"]


def test_the_calibrated_rule_turns_where_the_widened_interval_reaches_1() -> None:
    """The lead's lower bound divided by 1 + spread: a spread just under ci_low − 1 keeps the pick, just over
    names it."""
    answers = answer(one_process_run({128: 1.08}))
    (only,) = answers.picks.values()
    assert only.verdict == WINNER and only.estimate is not None
    margin = only.estimate.ci_low - 1
    save_calibration(calibration(margin * 0.9, Fingerprint.of(ENVIRONMENT)))
    assert one_process_caveats(answers) == []
    save_calibration(calibration(margin * 1.1, Fingerprint.of(ENVIRONMENT)))
    (found,) = one_process_caveats(answers)
    assert found.rule == MAY_NOT_REPLICATE and "n=128" in text_of(found)


def test_leads_beyond_the_spread_say_nothing_and_a_missing_calibration_says_so_once() -> None:
    answers = answer(one_process_run({128: 1.06, 512: 1.5}))
    (unknown,) = one_process_caveats(answers)
    assert unknown.rule == UNCALIBRATED and "2 pick(s) rest on one process" in text_of(unknown)
    assert "`mhabench calibrate --device cpu` measures it" in text_of(unknown) and "--replicates 3" in text_of(unknown)
    assert (unknown.figures["picks"], unknown.figures["fingerprint"]) == (2, Fingerprint.of(ENVIRONMENT).key)
    assert [one["case"] for one in unknown.figures["named"]][-1] == "n=512 h=4 d=64 b=1 float32"  # closest first
    save_calibration(calibration(0.02, Fingerprint.of(ENVIRONMENT)))
    assert one_process_caveats(answers) == []


def test_an_uncalibrated_machine_names_every_pick_the_closest_lead_first() -> None:
    """No fixed margin decides which picks are named: all are, the smallest lead first, and its rows with them."""
    answers = answer(one_process_run({128: 2.0, 256: 1.05, 512: 1.3}))
    (unknown,) = one_process_caveats(answers)
    named = [text_of(unknown).index(f"n={seq_len} ") for seq_len in (256, 512, 128)]
    assert named == sorted(named)
    assert unknown.figures["picks"] == len(answers.picks)


def test_a_replicated_run_needs_no_calibration_caveat() -> None:
    run = replicated_run([{"fused": 1.06}, {"fused": 1.07}, {"fused": 1.05}])
    assert one_process_caveats(answer(run)) == []


def test_the_calibration_sweep_is_a_valid_replicated_config() -> None:
    config = calibration_config("cpu", 4)
    assert (config.replicates, config.device, config.name) == (4, "cpu", "calibration")
    assert config.implementations == ["naive", "per_head", "fused"]


def test_calibrate_show_prints_this_machine_s_calibration_or_one_line_without_one() -> None:
    missing = CliRunner().invoke(app, ["calibrate", "--show", "--device", "cpu"])
    assert missing.exit_code == 2 and "no calibration for this machine" in missing.output
    here = Fingerprint.of(environment(torch.device("cpu")))
    save_calibration(dataclasses.replace(calibration(0.07, here), ratios=[{"impl": "fused", "range": 0.07}]))
    shown = CliRunner().invoke(app, ["calibrate", "--show", "--device", "cpu"])
    assert shown.exit_code == 0 and "between-process spread 7.0%" in shown.output and here.key in shown.output


def test_calibrate_refuses_a_single_process() -> None:
    result = CliRunner().invoke(app, ["calibrate", "--processes", "1"])
    assert result.exit_code == 2 and "--processes" in result.output


def test_calibrate_from_reads_a_replicated_run_on_disk_and_refuses_a_single_process(tmp_path: Path) -> None:
    from synthetic_runs import write_run

    single = write_run(tmp_path, "single", [row("naive", [1.0] * 6), row("fused", [0.5] * 6)])
    refused = CliRunner().invoke(app, ["calibrate", "--from", str(single)])
    assert refused.exit_code == 2 and "not a replicated run" in refused.output
