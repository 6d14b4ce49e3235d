"""``compare`` reads the runs' own reference timings: rows judged where the machine was steady, every timed row
``cannot judge`` where it moved within or between the runs, counted work gated exactly, and an exit code for each
outcome; on synthetic runs whose machine movement is known, on recorded pairs of the gate's sittings, and on the
recorded GPU run with hardware counters."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from shared_runs import recorded
from synthetic_runs import rounds, row, with_counts, write_replicated_run, write_run
from test_findings_runs import unpack
from typer.testing import CliRunner

from mhabench.analysis.compare import compare_runs, machine_spread
from mhabench.analysis.machine_drift import RowMachine, machine_move
from mhabench.analysis.two_run_gate import CANNOT_JUDGE, REGRESSION, GateResult
from mhabench.analysis.verdict import Change, Unjudged
from mhabench.analysis.work_change import WorkChange, changes
from mhabench.cli import app
from mhabench.results.store import Run, load_run
from mhabench.views.compare import machine_lines
from mhabench.views.machine import machine_note, work_cell

SEQ_LENS = (128, 256)
"""At d_model 64 the synthetic ``fused`` rows lie above the ridge (compute-bound), the ``naive`` rows below it."""


def write_pair_run(
    root: Path, name: str, factor: float, reference_ms: list[float], fused_factor: float = 1.0, **counts: float
) -> Path:
    """A one-process run of naive and fused at ``SEQ_LENS`` on a machine ``factor`` times slower than 1.0, with the
    reference timings ``reference_ms`` in its manifest; ``fused_factor`` is a real change of fused's code."""
    records = []
    for seq_len in SEQ_LENS:
        medians = {"naive": 2.0 * factor, "fused": 1.0 * factor * fused_factor}
        times = rounds(medians, count=30, drift=0.01, noise=0.005, seed=seq_len + len(name))
        for impl in medians:
            record = row(impl, times[impl], seq_len=seq_len)
            records.append(with_counts(record, **counts) if impl == "fused" and counts else record)
    run_dir = write_run(root, name, records)
    return with_reference(run_dir, reference_ms)


def with_reference(run_dir: Path, reference_ms: list[float]) -> Path:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["drift"] = {"workload": "512×512 float32 matmul on cpu", "reference_ms": reference_ms}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def verdicts(base: Path, candidate: Path, threshold: float = 0.05) -> dict[tuple[str, int], str]:
    comparison = compare_runs(load_run(base), load_run(candidate), threshold)
    return {
        (impl, int(seq_len)): verdict
        for impl, seq_len, verdict in zip(
            comparison.rows["impl"], comparison.rows["seq_len"], comparison.rows["verdict"], strict=True
        )
    }


def test_a_machine_slower_between_the_runs_leaves_every_timed_row_unjudged(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.73, 1.75, 1.74])
    candidate = write_pair_run(tmp_path, "cand", 1.35, [2.34, 2.35, 2.36])  # the same code, a machine 35 % slower
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05)
    assert set(comparison.rows["verdict"]) == {Unjudged.CANNOT_JUDGE.value}  # compute- and memory-bound alike
    assert set(comparison.rows["machine"]) == {RowMachine.MOVED_BETWEEN.value}
    assert comparison.rows["ratio"].between(1.3, 1.4).all()  # the rows' ratios stay as measured, not corrected
    assert machine_note(comparison.rows.iloc[0].to_dict(), comparison.machine) == (
        "the machine moved +35% between the runs"
    )
    machine = machine_lines(comparison)[0]
    assert "(+35%); within a run it moved up to 1%" in machine
    assert "past the threshold (5%) between the runs; 4 timed row(s) cannot be judged" in machine
    # without the runs' evidence the same rows read as a 35 % regression of everything (what the gate used to say)
    for run_dir in (base, candidate):
        with_reference(run_dir, [])
    assert set(verdicts(base, candidate).values()) == {Change.SLOWER.value}


def test_a_real_regression_on_a_machine_that_sped_up_as_much_is_cannot_judge_by_time_and_fails_by_work(
    tmp_path: Path,
) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [2.0, 2.01], flops_factor=1.0)
    # the machine got 35 % faster and fused's code 35 % slower, with a third more FLOPs: its raw ratio is 1.0
    candidate = write_pair_run(tmp_path, "cand", 1 / 1.35, [1.48, 1.485], fused_factor=1.35, flops_factor=4 / 3)
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05)
    assert set(comparison.rows["verdict"]) == {Unjudged.CANNOT_JUDGE.value}  # never `same` (a pass) nor `faster`
    assert set(comparison.work_rises["impl"]) == {"fused"}
    gate = GateResult(len(comparison.regressions), len(comparison.work_rises), len(comparison.unjudged))
    assert gate.exit_code("fail") == REGRESSION and gate.exit_code("pass") == REGRESSION
    time_only = GateResult(len(comparison.regressions), 0, len(comparison.unjudged))
    assert time_only.exit_code("fail") == CANNOT_JUDGE
    # the same regression without a rise in counted work: cannot judge (exit 3), never a pass unless asked for
    for run_dir in (base, candidate):
        frame = pd.read_csv(run_dir / "results.csv")
        frame["measured_flops"] = frame["flops"]
        frame.to_csv(run_dir / "results.csv", index=False)
        (run_dir / "results.parquet").unlink()
    code, output = compare_cli(str(base), str(candidate), "--fail-on-regression")
    assert code == CANNOT_JUDGE and "cannot judge" in output


def test_a_machine_that_moved_within_a_run_leaves_every_row_unjudged_never_slower(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.73, 1.74])
    candidate = write_pair_run(tmp_path, "cand", 1.38, [1.73, 2.52])  # +46 % within the candidate
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05)
    assert set(comparison.rows["verdict"]) == {Unjudged.CANNOT_JUDGE.value}
    assert set(comparison.rows["machine"]) == {RowMachine.MOVED_WITHIN.value}  # within first, though it moved between
    move = comparison.machine
    assert move is not None and move.moved_within and move.within == pytest.approx(2.52 / 1.73 - 1)
    assert machine_note(comparison.rows.iloc[0].to_dict(), move) == "the machine moved 46% within a run"
    assert "between the runs and within a run; 4 timed row(s)" in machine_lines(comparison)[0]


def test_a_steady_machine_changes_nothing(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.73, 1.74])
    candidate = write_pair_run(tmp_path, "cand", 1.0, [1.74, 1.75], fused_factor=1.3)
    found = verdicts(base, candidate)
    assert {found[("fused", n)] for n in SEQ_LENS} == {Change.SLOWER.value}
    assert {found[("naive", n)] for n in SEQ_LENS} == {Change.SAME.value}
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05)
    assert set(comparison.rows["machine"]) == {""}
    assert "steady" in machine_lines(comparison)[0]


def test_a_run_that_did_not_watch_the_machine_is_judged_as_before(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [])
    candidate = write_pair_run(tmp_path, "cand", 1.0, [1.73, 2.52], fused_factor=1.3)  # moved, but only one side knows
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05)
    assert comparison.machine is not None and comparison.machine.reason is None
    assert {v for i, v in zip(comparison.rows["impl"], comparison.rows["verdict"], strict=True) if i == "fused"} == {
        Change.SLOWER.value
    }
    assert machine_lines(comparison)[0].startswith("Machine: not watched (base recorded no reference timings)")


def test_replicated_runs_read_every_process_reference_timings(tmp_path: Path) -> None:
    processes = [{"naive": 2.0, "fused": 1.0}] * 3
    base = write_replicated_run(tmp_path, "base", processes, seq_lens=SEQ_LENS, drift=0.01)
    candidate = write_replicated_run(tmp_path, "cand", processes, seq_lens=SEQ_LENS, drift=0.01)
    for run_dir, timings in ((base, [[1.0, 1.01], [1.0, 1.02], [1.01, 1.0]]), (candidate, [[1.0], [1.0], [1.5]])):
        manifest = json.loads((run_dir / "manifest.json").read_text())
        manifest["replicated_from"] = [{"replicate": i, "drift": {"reference_ms": ms}} for i, ms in enumerate(timings)]
        (run_dir / "manifest.json").write_text(json.dumps(manifest))
    move = machine_move(load_run(base), load_run(candidate), 0.05)
    assert move.candidate is not None and move.candidate.reference_ms == (1.0, 1.0, 1.5)
    assert move.moved_within  # one process of the candidate ran on a machine 50 % slower
    assert set(verdicts(base, candidate).values()) == {Unjudged.CANNOT_JUDGE.value}


# --- recorded pairs whose reference moved between the runs only (docs/findings/gate.md, second sitting) -----------

PAIR_5 = ("20261129T110000Z-gate", "20261129T110011Z-gate")
"""Loaded A/A pair 5: the same code twice, the reference matmul 28 % faster in the second run and steady (4 %)
within each; the rows' own ratios ×0.76–×0.83."""
CYCLE_2_X75 = ("20261129T104013Z-gate", "20261129T104033Z-gate")
"""Idle A/B cycle 2 with x75: the plugin ``my_fused`` slowed by ×1.30–×1.36 (as ``ab`` measured it) with 19–25 %
more FLOPs, the reference 22 % faster in the candidate and steady (2 %) within each; the unchanged ``fused`` rows
×0.60–×0.67."""


def recorded_pair(run_ids: tuple[str, str], into: Path) -> tuple[Run, Run]:
    base, candidate = (load_run(folder) for folder in unpack(list(run_ids), into))
    return base, candidate


def unwatched(run: Run) -> Run:
    manifest = copy.deepcopy(run.manifest)
    manifest.drift = None
    return Run(run.path, manifest, run.rows)


@pytest.mark.parametrize("run_ids", [PAIR_5, CYCLE_2_X75])
def test_recorded_pairs_whose_machine_moved_between_the_runs_judge_no_timed_row(
    run_ids: tuple[str, str], tmp_path: Path
) -> None:
    base, candidate = recorded_pair(run_ids, tmp_path)
    comparison = compare_runs(base, candidate, 0.05, between_process_spread=machine_spread([base, candidate]))
    move = comparison.machine
    assert move is not None and move.moved_between and not move.moved_within
    assert len(comparison.rows) == 6
    assert set(comparison.rows["verdict"]) == {Unjudged.CANNOT_JUDGE.value}
    assert set(comparison.rows["machine"]) == {RowMachine.MOVED_BETWEEN.value}
    # blind to the reference, compare calls the unchanged code faster in both pairs
    blind = compare_runs(unwatched(base), unwatched(candidate), 0.05)
    assert (blind.rows["verdict"][blind.rows["impl"] == "fused"] == Change.FASTER.value).all()


def test_the_recorded_regression_on_a_faster_machine_fails_by_counted_work(tmp_path: Path) -> None:
    base, candidate = recorded_pair(CYCLE_2_X75, tmp_path)
    comparison = compare_runs(base, candidate, 0.05)
    assert set(comparison.work_rises["impl"]) == {"my_fused"}
    gate = GateResult(len(comparison.regressions), len(comparison.work_rises), len(comparison.unjudged))
    assert gate.exit_code("pass") == REGRESSION
    # the machine sped up more than the plugin slowed down: blind to the reference its rows read faster, or ~
    blind = compare_runs(unwatched(base), unwatched(candidate), 0.05)
    plugin = set(blind.rows["verdict"][blind.rows["impl"] == "my_fused"])
    assert Change.SLOWER.value not in plugin and Change.FASTER.value in plugin


# --- counted work ---------------------------------------------------------------------------------------------------


def test_counted_work_changes_are_exact_and_a_rise_fails_the_gate_where_time_cannot_be_judged(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.73, 1.74], flops_factor=1.0)
    candidate = write_pair_run(tmp_path, "cand", 1.3, [1.73, 2.52], flops_factor=4 / 3)
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05)
    assert set(comparison.rows["verdict"]) == {Unjudged.CANNOT_JUDGE.value}
    fused = comparison.rows[comparison.rows["impl"] == "fused"].iloc[0]
    flops = 8 * 128 * 64**2 + 4 * 128**2 * 64
    assert fused["work_changes"] == [WorkChange("measured_flops", flops, int(flops * 4 / 3))]
    assert work_cell(fused) == f"FLOPs {flops} → {int(flops * 4 / 3)} (+33.3%)"
    assert len(comparison.work_rises) == len(SEQ_LENS)
    gate = GateResult(len(comparison.regressions), len(comparison.work_rises), len(comparison.unjudged))
    assert gate.exit_code("fail") == REGRESSION and gate.exit_code("pass") == REGRESSION


def test_work_that_fell_or_rose_below_the_threshold_does_not_fail() -> None:
    base = [{"status": "ok", "measured_flops": 100.0, "ops_per_call": 20}]
    assert changes(base, [{"status": "ok", "measured_flops": 104.0, "ops_per_call": 20}])[0].relative == (
        pytest.approx(0.04)
    )
    assert changes(base, [{"status": "ok", "measured_flops": 100.0, "ops_per_call": 20}]) == []
    assert changes(base, [{"status": "ok", "ops_per_call": 19}])[0].relative < 0  # a column one side lacks is skipped


def test_gpu_hardware_counters_of_the_recorded_run_are_compared_exactly(tmp_path: Path) -> None:
    source = recorded("20261127T074353Z-default-gpu-counters-partial")
    base, candidate = tmp_path / "base", tmp_path / "cand"
    for target in (base, candidate):
        shutil.copytree(source, target)
    frame = pd.read_csv(candidate / "results.csv")
    fused = frame["impl"] == "fused"
    frame.loc[fused, "tensor_flops"] = (frame.loc[fused, "tensor_flops"] * 1.5).astype("int64")
    frame.to_csv(candidate / "results.csv", index=False)
    (candidate / "results.parquet").unlink()
    same = compare_runs(load_run(base), load_run(base), 0.05)
    assert not same.rows["work_changes"].map(bool).any()  # the run against itself: every counter equal
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05)
    moved = comparison.rows[comparison.rows["work_changes"].map(bool)]
    assert set(moved["impl"]) == {"fused"}
    first = moved.iloc[0]["work_changes"][0]
    assert first.column == "tensor_flops" and first.relative == pytest.approx(0.5, abs=1e-9)
    assert set(comparison.work_rises["impl"]) == {"fused"}


# --- the command ----------------------------------------------------------------------------------------------------


def compare_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["compare", *args])
    return result.exit_code, result.output


def test_exit_codes_regression_cannot_judge_and_on_noise(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.73, 1.74])
    moved = write_pair_run(tmp_path, "moved", 1.3, [1.73, 2.52])
    slower = write_pair_run(tmp_path, "slower", 1.0, [1.74, 1.73], fused_factor=1.3)
    same = write_pair_run(tmp_path, "same", 1.0, [1.74, 1.73])
    code, output = compare_cli(str(base), str(moved), "--fail-on-regression")
    assert code == CANNOT_JUDGE and "cannot judge" in output and "exit 3" in output
    code, output = compare_cli(str(base), str(moved), "--fail-on-regression", "--on-noise", "pass")
    assert code == 0 and "cannot judge" in output and "--on-noise pass" in output
    assert compare_cli(str(base), str(slower), "--fail-on-regression")[0] == REGRESSION
    assert compare_cli(str(base), str(same), "--fail-on-regression")[0] == 0
    code, output = compare_cli(str(base), str(same), "--on-noise", "maybe")
    assert code == 2 and "--on-noise" in output


def test_a_half_written_results_csv_is_one_line_naming_resume(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.73, 1.74])
    cut = write_pair_run(tmp_path, "cut", 1.0, [1.73, 1.74])
    data = (cut / "results.csv").read_bytes()
    (cut / "results.csv").write_bytes(data[: data.rfind(b"\n", 0, len(data) - 1) + 40])  # the last row cut mid-line
    (cut / "results.parquet").unlink()
    for args in ([str(base), str(cut)], [str(cut)]):
        code, output = compare_cli(*args)
        assert code == 2
        assert "half-written" in output and "mhabench run --resume" in output and "Traceback" not in output
        assert len(output.strip().splitlines()) == 1
    assert len(load_run(cut).rows) == 2 * len(SEQ_LENS) - 1  # the cut line is no row of empty cells


def test_compare_says_a_run_is_interrupted(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.73, 1.74])
    stopped = write_pair_run(tmp_path, "stopped", 1.0, [1.73, 1.74])
    manifest = json.loads((stopped / "manifest.json").read_text())
    (stopped / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
    code, output = compare_cli(str(base), str(stopped))
    assert code == 0
    assert "stopped is interrupted" in " ".join(output.split()) and "run --resume" in output


def test_the_gate_outcome_orders_regression_before_cannot_judge() -> None:
    assert GateResult(0, 0, 0).exit_code() == 0
    assert GateResult(1, 0, 5).exit_code() == REGRESSION
    assert GateResult(0, 1, 5).exit_code("pass") == REGRESSION
    assert GateResult(0, 0, 5).exit_code("fail") == CANNOT_JUDGE
    assert GateResult(0, 0, 5).exit_code("pass") == 0
