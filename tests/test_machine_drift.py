"""``compare`` reads the runs' own reference timings: rows corrected where the reference can correct them, ``cannot
judge`` where it cannot, counted work gated exactly, and an exit code for each outcome; on synthetic runs whose
machine movement is known, and on the recorded GPU run with hardware counters."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_runs import recorded
from synthetic_runs import rounds, row, with_counts, write_replicated_run, write_run
from test_findings_runs import unpack
from typer.testing import CliRunner

from mhabench.analysis import machine_drift
from mhabench.analysis.compare import compare_runs
from mhabench.analysis.machine_drift import TRACKING_BAND, RowMachine, machine_move, tracked_interval
from mhabench.analysis.two_run_gate import CANNOT_JUDGE, REGRESSION, GateResult
from mhabench.analysis.verdict import Change, Unjudged
from mhabench.analysis.work_change import WorkChange, changes
from mhabench.cli import app
from mhabench.results.store import load_run
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


def test_a_machine_slower_between_the_runs_is_corrected_where_the_reference_can_and_not_judged_elsewhere(
    tmp_path: Path,
) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.73, 1.75, 1.74])
    candidate = write_pair_run(tmp_path, "cand", 1.35, [2.34, 2.35, 2.36])  # the same code, a machine 35 % slower
    found = verdicts(base, candidate)
    # compute-bound fused: divided by the reference's +35 % it is the same had it followed the reference fully,
    # 16 % slower had it followed it with the band's lowest elasticity: the machine leaves it open
    assert {found[("fused", n)] for n in SEQ_LENS} == {Unjudged.CANNOT_JUDGE.value}
    # memory-bound naive: not corrected
    assert {found[("naive", n)] for n in SEQ_LENS} == {Unjudged.CANNOT_JUDGE.value}
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05)
    assert set(comparison.rows["machine"]) == {RowMachine.TRACKING.value, RowMachine.OTHER_BOUND.value}
    fused = comparison.rows[comparison.rows["impl"] == "fused"]
    assert all(low <= 1.0 <= high for _, (low, high) in fused["tracked"])  # one for one: the same
    machine = machine_lines(comparison)[0]
    assert "+35%" in machine and "2 row(s) corrected" in machine and "4 cannot be judged" in machine
    # without the runs' evidence the same rows read as a 35 % regression of everything (what the gate used to say)
    for run_dir in (base, candidate):
        with_reference(run_dir, [])
    assert set(verdicts(base, candidate).values()) == {Change.SLOWER.value}


def test_a_real_regression_on_a_machine_that_sped_up_as_much_is_still_found(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [2.0, 2.01])
    # the machine got 35 % faster and fused's code 35 % slower: its raw ratio is 1.0, its corrected one 1.35
    candidate = write_pair_run(tmp_path, "cand", 1 / 1.35, [1.48, 1.485], fused_factor=1.35)
    found = verdicts(base, candidate)
    assert {found[("fused", n)] for n in SEQ_LENS} == {Change.SLOWER.value}
    assert Change.FASTER.value not in found.values()  # naive's raw "faster" is not judged


def test_a_machine_that_moved_within_a_run_leaves_every_row_unjudged_never_slower(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.73, 1.74])
    candidate = write_pair_run(tmp_path, "cand", 1.38, [1.73, 2.52])  # +46 % within the candidate
    assert set(verdicts(base, candidate).values()) == {Unjudged.CANNOT_JUDGE.value}
    move = machine_move(load_run(base), load_run(candidate), 0.05)
    assert move.moved_within and move.within == pytest.approx(2.52 / 1.73 - 1)


def test_a_steady_machine_changes_nothing(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.73, 1.74])
    candidate = write_pair_run(tmp_path, "cand", 1.0, [1.74, 1.75], fused_factor=1.3)
    found = verdicts(base, candidate)
    assert {found[("fused", n)] for n in SEQ_LENS} == {Change.SLOWER.value}
    assert {found[("naive", n)] for n in SEQ_LENS} == {Change.SAME.value}
    assert "steady" in machine_lines(compare_runs(load_run(base), load_run(candidate), 0.05))[0]


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


def test_the_corrected_interval_spans_every_elasticity_of_the_tracking_band() -> None:
    low_beta = TRACKING_BAND[0]
    found = tracked_interval(0.80, 0.79, 0.81, factor=0.72)
    assert found["tracked"] == (
        pytest.approx((0.79 / 0.72**low_beta, 0.81 / 0.72**low_beta)),
        pytest.approx((0.79 / 0.72, 0.81 / 0.72)),
    )
    assert found["ci_low"] == pytest.approx(0.79 / 0.72**low_beta)  # a faster machine: the lower end corrects least
    assert found["ci_high"] == pytest.approx(0.81 / 0.72)
    assert found["ci_low"] < found["ratio"] < found["ci_high"]
    slower = tracked_interval(1.30, 1.29, 1.31, factor=1.2)  # a slower machine: the lower end corrects most
    assert (slower["ci_low"], slower["ci_high"]) == (pytest.approx(1.29 / 1.2), pytest.approx(1.31 / 1.2**low_beta))


def test_a_row_that_followed_a_faster_machine_part_of_the_way_is_never_slower(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.0, 1.01])
    # unchanged code: the reference 28 % faster, the rows only 20 % (elasticity 0.68): divided by the whole
    # factor they read ×1.11, slower; over the band they are slower at one end and faster at the other
    candidate = write_pair_run(tmp_path, "cand", 0.80, [0.72, 0.725])
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05)
    fused = comparison.rows[comparison.rows["impl"] == "fused"]
    assert set(fused["machine"]) == {RowMachine.TRACKING.value}
    assert all(high_end[0] > 1.05 for _, high_end in fused["tracked"])  # full tracking alone would say slower
    assert set(fused["verdict"]) == {Unjudged.CANNOT_JUDGE.value}
    factor = comparison.machine.factor
    note = machine_note(fused.iloc[0].to_dict(), comparison.machine)
    band = f"÷{factor**0.5:.3f} to ÷{factor:.3f}"
    assert note == f"corrected by the reference ({band}): the verdict depends on how far the row follows it"
    assert comparison.regressions.empty
    gate = GateResult(len(comparison.regressions), len(comparison.work_rises), len(comparison.unjudged))
    assert gate.exit_code("fail") == CANNOT_JUDGE and gate.exit_code("pass") == 0


def test_a_change_past_the_threshold_whichever_way_the_row_tracked_is_judged(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.0, 1.01])
    slower = write_pair_run(tmp_path, "slower", 1.2, [1.2, 1.205], fused_factor=1.4)  # machine +20 %, code +40 %
    found = verdicts(base, slower)
    assert {found[("fused", n)] for n in SEQ_LENS} == {Change.SLOWER.value}
    # a machine that moved 6 % and rows that followed it: the same at both ends of the band
    same = write_pair_run(tmp_path, "same", 1.06, [1.06, 1.065])
    found = verdicts(base, same)
    assert {found[("fused", n)] for n in SEQ_LENS} == {Change.SAME.value}


def test_a_regression_the_band_could_hide_is_cannot_judge_never_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [2.0, 2.01])
    candidate = write_pair_run(tmp_path, "cand", 1 / 1.35, [1.48, 1.485], fused_factor=1.35)
    # a band down to no tracking at all: at that end the 35 % regression on a 35 % faster machine reads the same
    monkeypatch.setattr(machine_drift, "TRACKING_BAND", (0.0, 1.0))
    found = verdicts(base, candidate)
    assert {found[("fused", n)] for n in SEQ_LENS} == {Unjudged.CANNOT_JUDGE.value}


# --- the recorded A/A pair whose reference moved between the runs only -------------------------------------------

PAIR_5 = ("20261129T110000Z-gate", "20261129T110011Z-gate")
"""docs/findings/gate.md, second sitting, loaded A/A pair 5: the same code twice, the reference matmul 28 % faster
in the second run and steady (4 %) within each; the rows' own ratios ×0.76–×0.83."""


def test_the_recorded_a_a_pair_whose_rows_followed_the_reference_part_of_the_way_no_longer_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, candidate = (load_run(folder) for folder in unpack(list(PAIR_5), tmp_path))
    comparison = compare_runs(base, candidate, 0.05)
    move = comparison.machine
    assert move is not None and move.moved_between and not move.moved_within
    assert move.factor == pytest.approx(0.72, abs=0.01)
    assert comparison.regressions.empty and Change.FASTER.value not in set(comparison.rows["verdict"])
    # the same pair divided by the whole factor (rows assumed to follow the reference one for one): 2 rows slower
    monkeypatch.setattr(machine_drift, "TRACKING_BAND", (1.0, 1.0))
    assert len(compare_runs(base, candidate, 0.05).regressions) == 2


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


def test_reference_corrections_use_the_rows_placement_not_their_name(tmp_path: Path) -> None:
    base = write_pair_run(tmp_path, "base", 1.0, [1.0, 1.0])
    candidate = write_pair_run(tmp_path, "cand", 1.35, [1.35, 1.35])
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05)
    placed = comparison.rows.set_index(["impl", "seq_len"])
    for impl in ("naive", "fused"):
        for seq_len in SEQ_LENS:
            intensity, ridge = placed.loc[(impl, seq_len), ["intensity", "ridge"]]
            corrected = {RowMachine.CORRECTED.value, RowMachine.TRACKING.value}
            expected = corrected if intensity >= ridge else {RowMachine.OTHER_BOUND.value}
            assert placed.loc[(impl, seq_len), "machine"] in expected
    _, (low, high) = placed.loc[("fused", 128), "tracked"]
    assert low <= 1.0 <= high and np.isclose(np.sqrt(low * high), 1.0, atol=0.02)  # one for one: ×1.0
