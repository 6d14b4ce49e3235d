"""make gpu-evidence without a GPU: the step estimates from the recorded H100 files, every run/skip decision of the
budget rule on a fake GPU whose steps last what the recordings say, the process-group kill at the limit, the
archive rewritten after each step, and the reader's answers on archives built from the recorded files."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from shared_runs import recorded, shared_runs

from mhabench.checks import evidence, evidence_estimates, evidence_run
from mhabench.checks.evidence_estimates import Estimate
from mhabench.checks.evidence_plan import RESERVE_S, Outcome, Record, Step, run_plan

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "configs"
OVERRUN_S = 15.0
"""The most the command may run past its budget."""


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t


class FakeGpu:
    """A step runner that advances the fake clock by each step's recorded duration and writes recorded outputs; at
    the limit it is killed (the clock moves by the limit and the kill's grace) and reports a timeout."""

    def __init__(
        self,
        clock: FakeClock,
        seconds: dict[str, float],
        work: Path | None = None,
        outputs: dict[str, Callable[[Path], None]] | None = None,
    ) -> None:
        self.clock, self.seconds, self.work, self.outputs = clock, seconds, work, outputs or {}
        self.ran: list[tuple[str, float]] = []

    def __call__(self, step: Step, limit_s: float) -> Outcome:
        self.ran.append((step.name, limit_s))
        duration = self.seconds[step.name]
        if duration > limit_s:
            self.clock.t += limit_s + evidence_run.KILL_GRACE_S
            return Outcome(-9, timed_out=True)
        self.clock.t += duration
        if self.work is not None and step.name in self.outputs:
            (self.work / step.name).mkdir(parents=True, exist_ok=True)
            self.outputs[step.name](self.work / step.name)
        return Outcome(0 if self.work is None or step.name in self.outputs else 1)


@pytest.fixture(scope="module")
def estimates() -> dict[str, Estimate]:
    runs = shared_runs()
    if runs is None:
        pytest.skip("shared/runs is not on this machine")
    return evidence_estimates.recorded_estimates(runs, CONFIGS)


def steps() -> list[Step]:
    return evidence_run.evidence_steps(sys.executable, CONFIGS)


def recorded_seconds(estimates: dict[str, Estimate]) -> dict[str, float]:
    """Each step lasting exactly its estimate from the recordings."""
    return {step.name: estimates[step.kind].seconds for step in steps()}


def test_the_packaged_estimates_are_what_the_recordings_give(estimates: dict[str, Estimate]) -> None:
    """The GPU machines read the packaged JSON; it must equal the recordings' figures (rewrite it with
    ``python -m mhabench.checks.evidence_estimates ../shared/runs --write``)."""
    packaged = evidence_estimates.packaged_estimates()
    assert packaged.keys() == estimates.keys()
    for kind, estimate in estimates.items():
        assert packaged[kind].seconds == pytest.approx(estimate.seconds, rel=1e-9), kind
        assert packaged[kind].basis == estimate.basis


def test_estimates_rest_on_the_recorded_files(estimates: dict[str, Estimate]) -> None:
    """Each estimate is priced from the recordings: the sweep at 90 s or less, the checks from gpu_check.log's
    seconds (dram_copy 7.4 s, fused_hardware_flops 8.8 s) plus a 5 s energy window and the start-up."""
    seconds = evidence_estimates.check_seconds(recorded("h100-20261127/gpu_check.log"))
    assert seconds["dram_copy"] == 7.4 and seconds["fused_hardware_flops"] == 8.8 and len(seconds) == 19
    assert estimates["sweep"].seconds <= 90
    assert estimates["checks"].seconds > 7.4 + 8.8 + 5.0
    assert estimates["counters_range"].seconds > estimates["subset"].seconds
    assert estimates["energy"].seconds - estimates["subset"].seconds == pytest.approx(4 * 3 * 2.2)
    per_kernel = evidence_estimates.kernel_replay_s_per_kernel(
        evidence_estimates.Recordings(shared_runs(), CONFIGS), seconds["fused_hardware_flops"]
    )
    assert 0 < per_kernel < 1  # 1,174 kernels in about 4.8 minutes, less the rows' own time
    assert all(e.seconds > 0 and e.basis for e in estimates.values())


def expected_decisions(estimates: dict[str, Estimate], seconds: dict[str, float], budget_s: float) -> list[Record]:
    """The rule restated: by value per second among ready steps, run when the price fits what is left."""
    clock = FakeClock()
    return run_plan(steps(), estimates, budget_s, clock.now(), clock, FakeGpu(clock, seconds))


def test_the_default_budget_runs_by_value_per_second_and_skips_the_third_sweep(estimates: dict[str, Estimate]) -> None:
    clock = FakeClock()
    start = clock.now()
    gpu = FakeGpu(clock, recorded_seconds(estimates))
    records = run_plan(steps(), estimates, 480.0, start, clock, gpu)
    order = [name for name, _ in gpu.ran]
    assert order == [
        "checks",
        "sweep1",
        "subset",
        "counters_range",
        "fp8",
        "energy",
        "counters_kernel",
        "sweep2",
        "spread2",
    ]
    status = {r.name: (r.status, r.reason) for r in records}
    # sweep3 alone (~89 s) would fit the ~112 s left, but not with the spread read over it (~28 s)
    assert status["sweep3"][0] == "skipped" and status["sweep3"][1].startswith("needs ~117 s with spread3, 112 s left")
    assert status["spread3"] == ("skipped", "needs sweep3")
    assert clock.now() - start <= 480.0
    # every decision against the clock: ran iff its price fitted what was left, its limit exactly that
    elapsed = 0.0
    for record in records:
        left = 480.0 - elapsed - RESERVE_S
        if record.status == "done":
            assert record.estimate_s <= left and record.limit_s == pytest.approx(left)
            elapsed += record.actual_s or 0.0
        elif record.reason.startswith("needs ~"):
            assert record.estimate_s + (estimates["spread"].seconds if "with" in record.reason else 0) > left


def test_a_later_sweep_is_priced_at_the_first_ones_wall_time(estimates: dict[str, Estimate]) -> None:
    """The first sweep took the 24-case sweep's recorded 121.6 s: the second and third are priced at that, not
    at 89 s, and the third no longer fits with its spread."""
    seconds = recorded_seconds(estimates)
    seconds["sweep1"] = seconds["sweep2"] = evidence_estimates.Recordings(shared_runs(), CONFIGS).sweep.wall_s
    clock = FakeClock()
    records = {r.name: r for r in run_plan(steps(), estimates, 480.0, clock.now(), clock, FakeGpu(clock, seconds))}
    assert records["sweep1"].actual_s == pytest.approx(121.562)
    assert records["sweep2"].estimate_s == pytest.approx(121.562) and records["sweep2"].status == "done"
    assert "sweep1's wall time" in records["sweep2"].basis
    assert records["sweep3"].status == "skipped" and records["sweep3"].reason.startswith("needs ~149 s with spread3")


@pytest.mark.parametrize("budget_s", [30.0, 60.0, 150.0, 300.0, 480.0, 900.0])
def test_no_budget_is_overrun_by_more_than_15_s_even_when_every_step_takes_twice_its_estimate(
    estimates: dict[str, Estimate], budget_s: float
) -> None:
    seconds = {name: 2 * value for name, value in recorded_seconds(estimates).items()}
    clock = FakeClock()
    start = clock.now()
    records = run_plan(steps(), estimates, budget_s, start, clock, FakeGpu(clock, seconds))
    assert clock.now() - start <= budget_s + OVERRUN_S
    timed_out = [r for r in records if r.status == "timed out"]
    assert all(r.reason.startswith("cut at the budget") for r in timed_out)
    assert {r.name for r in records} == {s.name for s in steps()}  # every step has its line


def test_a_small_budget_runs_only_what_fits_and_says_why_for_the_rest(estimates: dict[str, Estimate]) -> None:
    clock = FakeClock()
    records = {
        r.name: r
        for r in run_plan(steps(), estimates, 60.0, clock.now(), clock, FakeGpu(clock, recorded_seconds(estimates)))
    }
    assert records["checks"].status == "done"  # ~42 s of the 60
    assert records["sweep1"].reason == "needs ~89 s, 15 s left"  # next by value per second, but too long
    assert records["subset"].status == "done"  # ~12 s: a cheaper step still fills what is left
    assert records["sweep2"].reason == "needs sweep1"
    assert {r.status for name, r in records.items() if name not in ("checks", "subset")} == {"skipped"}


def test_a_step_past_its_limit_is_killed_with_its_process_group(tmp_path: Path) -> None:
    """A real child that starts a grandchild and sleeps: at the limit both are gone, within the kill's grace."""
    pid_file = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, time; p = subprocess.Popen(['sleep', '60']); "
        f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    )
    step = Step("slow", "slow", 1, (), lambda work: [[sys.executable, "-c", script]])
    started = time.monotonic()
    outcome = evidence_run.ProcessRunner(tmp_path)(step, 1.5)
    assert outcome.timed_out and time.monotonic() - started < 1.5 + 2 * evidence_run.KILL_GRACE_S + 2
    grandchild = int(pid_file.read_text())
    time.sleep(0.2)
    assert not running(grandchild)
    assert "$ " in (tmp_path / "slow" / "log.txt").read_text()


def running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's exit may wait for a reaper)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def copy_run(source: str) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        shutil.copytree(recorded(source), folder / Path(source).name)

    return write


def copy_check(folder: Path) -> None:
    shutil.copy(recorded("h100-20261127/gpu_check.json"), folder / "gpu_check.json")


def calibrate(folder: Path) -> None:
    """What the spread step's ``mhabench calibrate --from`` stores, computed here on the two recorded runs."""
    from mhabench.analysis.calibration import calibrate_across
    from mhabench.results.store import load_run

    os.environ["MHABENCH_CACHE_DIR"] = str(folder / "cache")
    try:
        calibrate_across([load_run(str(run.parent)) for run in sorted(folder.parent.glob("sweep*/*/manifest.json"))])
    finally:
        del os.environ["MHABENCH_CACHE_DIR"]


RECORDED_OUTPUTS = {
    "checks": copy_check,
    "sweep1": copy_run("20261126T070612Z-default-gpu"),
    "sweep2": copy_run("20261127T074353Z-default-gpu-counters-partial"),  # a second process of the same config
    "counters_kernel": copy_run("20261127T074353Z-default-gpu-counters-partial"),
    "spread2": calibrate,
}
"""What the recorded H100 files can stand for; every other step writes nothing (as a step that failed)."""


@pytest.fixture(scope="module")
def recorded_archive(tmp_path_factory: pytest.TempPathFactory, estimates: dict[str, Estimate]) -> Path:
    """The archive of a fake GPU run whose steps last what the recordings say and write the recorded files."""
    base = tmp_path_factory.mktemp("evidence")
    work, archive = base / "work", base / "out" / "gpu-evidence.tgz"
    work.mkdir()
    clock = FakeClock()
    seconds = recorded_seconds(estimates)
    seconds["sweep1"] = 121.562  # the 24-case sweep's command as the H100 ran it (h100-20261127/default-sweep.log)
    header = {"budget_s": 600.0, "started_at": clock.now()}

    def after_step(records: list[Record]) -> None:
        evidence_run.write_plan(work, records, header)
        evidence_run.write_archive(work, archive)
        assert not list(archive.parent.glob("*.partial"))  # written beside, renamed over
        with tarfile.open(archive) as tar:
            archived = {Path(name).parts[1] for name in tar.getnames() if len(Path(name).parts) > 1}
        # each rewrite holds every step finished so far: a command cut after any step keeps them
        assert {r.name for r in records if r.name in RECORDED_OUTPUTS and r.status == "done"} <= archived

    gpu = FakeGpu(clock, seconds, work, RECORDED_OUTPUTS)
    run_plan(steps(), estimates, 600.0, clock.now(), clock, gpu, after_step)
    return archive


def answers_of(archive: Path, tmp_path: Path) -> dict[str, evidence.Answer]:
    return {a.question: a for a in evidence.answers(evidence.unpack(archive, tmp_path))}


def test_the_reader_answers_each_question_from_the_recorded_h100_files(recorded_archive: Path, tmp_path: Path) -> None:
    found = answers_of(recorded_archive, tmp_path)
    assert [q for q, _ in evidence.QUESTIONS] == list(found)
    # the 2026-11-27 gpu-check: the old energy check (211 W over 74 ms) and the cudaMemcpy copy fall short
    assert found["energy"].verdict == "SHORT" and "211 W of a 700 W limit over 0.07 s" in found["energy"].figure
    assert found["dram_copy"].verdict == "SHORT" and "0.000" in found["dram_copy"].figure
    # fused's FLOPs matched the model, but through kernel replay: the range-replay question stays open
    assert found["fused_hardware_flops"].verdict == "SHORT" and "1.0000" in found["fused_hardware_flops"].figure
    assert found["fp8_attention"].verdict == "NOT RUN"
    # the sweep: 121.6 s, and its recorded rows (max_run_time_s 0.1) mostly below 8 samples
    assert found["default sweep wall time"].verdict == "SHORT"
    assert found["default sweep wall time"].figure.startswith("121.6 s wall, 24 of 92 ok rows")
    assert found["counters by range replay"].verdict == "NOT RUN"
    assert "wrote no run folder" in found["counters by range replay"].figure
    assert found["energy per call"].verdict == "NOT RUN"
    # two processes of one config on the H100: the between-process spread of docs/findings/replication.md
    assert found["between-process spread"].figure.startswith("7.9% over 2 processes")
    assert found["between-process spread"].verdict == "PASS"
    # the 4 cases both processes ran; torch_mha at n = 4096 moved 64.8 % (1 sample against 8), no pick changed
    assert found["spread across sweeps"].verdict == "SHORT"
    assert "largest ratio spread 64.8% (torch_mha" in found["spread across sweeps"].figure
    assert found["spread across sweeps"].figure.endswith("9 of 12 over their aim; picks changed in 0 cases")


def test_the_reader_cli_prints_a_line_per_question_and_the_plan(
    recorded_archive: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert evidence.main([str(recorded_archive)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert sum(line.split(" ")[0] in ("PASS", "SHORT", "NOT") for line in lines) == len(evidence.QUESTIONS)
    assert "budget 600 s" in out and "sweep1" in out and "estimate" in out and "actual" in out


def test_the_reader_refuses_what_is_not_an_archive_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert evidence.main([str(tmp_path / "missing.tgz")]) == 2
    (tmp_path / "bad.tgz").write_text("not a tar")
    assert evidence.main([str(tmp_path / "bad.tgz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("ARCHIVE ") for line in err)


def test_without_cuda_every_step_is_skipped_and_the_archive_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(evidence_run, "cuda_available", lambda: False)
    archive = tmp_path / "out" / "gpu-evidence.tgz"
    assert evidence_run.main(["--budget", "480", "--archive", str(archive), "--work", str(tmp_path / "w")]) == 0
    plan = json.loads((tmp_path / "w" / "plan.json").read_text())
    assert {s["status"] for s in plan["steps"]} == {"skipped"} and len(plan["steps"]) == len(steps())
    found = answers_of(archive, tmp_path / "x")
    assert {a.verdict for a in found.values()} == {"NOT RUN"}
    assert "SKIP (no CUDA device)" in capsys.readouterr().out


def test_a_bad_budget_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert evidence_run.main(["--budget", "-5", "--work", str(tmp_path / "w")]) == 2
    assert capsys.readouterr().err.strip() == "--budget -5: must be a positive number of seconds"


def test_every_step_command_names_a_config_that_exists_and_gpu_check_knows_its_checks(tmp_path: Path) -> None:
    from mhabench.checks.gpu import CHECKS

    assert set(evidence_run.CHECKS) <= set(CHECKS)
    for step in steps():
        for command in step.commands(tmp_path):
            assert all(Path(arg).is_file() for arg in command if arg.endswith(".yaml")), command


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_gpu_evidence_installs_then_runs_the_orchestrator_on_the_budget_and_archive_given() -> None:
    import subprocess

    command = ["make", "--no-print-directory", "-C", str(REPO), "-n", "gpu-evidence", "OUT=/tmp/out", "BUDGET=123"]
    recipe = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout
    assert "--target build/gpu-site" in recipe  # the install comes first and counts against the budget
    started = recipe.split("--started-at ")[1].split()[0]
    assert abs(float(started) - time.time()) < 60  # taken when make read the Makefile, before the install
    assert recipe.index("--target build/gpu-site .") < recipe.index("mhabench.checks.evidence_run")
    assert "--budget 123 --started-at" in recipe and "--archive /tmp/out/gpu-evidence.tgz" in recipe


# --- the reader's rules on synthetic work folders (recorded rows, edited) -----------------------------------------

COUNTERS_RUN = "20261127T074353Z-default-gpu-counters-partial"
RANGE_SOURCE = "ncu 2025.3.1.0, range replay: one workload per call, L2 flushed once per call"


def write_step(work: Path, name: str, actual_s: float, rows: pd.DataFrame | None = None, source: str = COUNTERS_RUN):
    """A finished step in plan.json and, when given, its run folder: the recorded manifest beside ``rows``."""
    plan_path = work / "plan.json"
    plan = json.loads(plan_path.read_text()) if plan_path.exists() else {"budget_s": 480.0, "steps": []}
    plan["steps"].append(
        {
            "name": name,
            "status": "done",
            "reason": "",
            "actual_s": actual_s,
            "returncode": 0,
            "estimate_s": actual_s,
            "kind": name,
            "answers": [],
            "basis": "",
            "limit_s": 480.0,
        }
    )
    plan_path.write_text(json.dumps(plan))
    if rows is not None:
        folder = work / name / "run"
        folder.mkdir(parents=True)
        shutil.copy(recorded(source) / "manifest.json", folder / "manifest.json")
        rows.to_csv(folder / "results.csv", index=False)


def test_a_sweep_cut_at_the_budget_falls_short_of_the_wall_time_aim(tmp_path: Path) -> None:
    rows = pd.read_csv(recorded("20261126T070612Z-default-gpu") / "results.csv").head(40)
    write_step(tmp_path, "sweep1", 120.0, rows, "20261126T070612Z-default-gpu")
    plan = json.loads((tmp_path / "plan.json").read_text())
    plan["steps"][0].update(status="timed out", reason="cut at the budget after 120 s (estimate 89 s)")
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    answer = {a.question: a for a in evidence.answers(tmp_path)}["default sweep wall time"]
    assert (
        answer.verdict == "SHORT" and answer.figure == "sweep1 timed out: cut at the budget after 120 s (estimate 89 s)"
    )


def counters_rows() -> pd.DataFrame:
    return pd.read_csv(recorded(COUNTERS_RUN) / "results.csv", keep_default_na=False)


def replay_case(rows: pd.DataFrame) -> pd.DataFrame:
    chosen = (rows["case_id"] == "d4096-h32/b1-n4096-d4096-h32-bfloat16") & rows["impl"].isin(["fused", "naive"])
    return rows[chosen].copy()


@pytest.mark.parametrize(("scale", "verdict"), [(1.02, "PASS"), (0.975, "PASS"), (1.05, "SHORT"), (0.9, "SHORT")])
def test_range_against_kernel_bytes_must_agree_within_3_percent(tmp_path: Path, scale: float, verdict: str) -> None:
    kernel = replay_case(counters_rows())
    ranged = kernel.assign(
        counters_source=RANGE_SOURCE,
        dram_read_bytes=kernel["dram_read_bytes"] * scale,
        dram_write_bytes=kernel["dram_write_bytes"] * scale,
    )
    write_step(tmp_path, "counters_range", 30.0, ranged)
    write_step(tmp_path, "counters_kernel", 22.0, kernel)
    found = {a.question: a for a in evidence.answers(tmp_path)}
    assert found["range vs kernel replay bytes"].verdict == verdict
    assert f"({scale - 1:+.1%})" in found["range vs kernel replay bytes"].figure
    assert found["counters by range replay"].verdict == "PASS"  # both rows by range replay
    kernel_only = {a.question: a for a in evidence.answers(tmp_path)}
    assert kernel_only["counters' cost per row"].verdict == "NOT RUN"  # no plain subset, no sweep: no cost


def test_counters_source_must_say_range_replay_on_every_ok_row(tmp_path: Path) -> None:
    rows = replay_case(counters_rows())
    rows["counters_source"] = [RANGE_SOURCE, "ncu 2025.3.1.0"]
    write_step(tmp_path, "counters_range", 30.0, rows)
    found = {a.question: a for a in evidence.answers(tmp_path)}
    assert found["counters by range replay"].verdict == "SHORT"
    assert found["counters by range replay"].figure == "1 of 2 ok rows counted by range replay"


@pytest.mark.parametrize(("counters_s", "verdict"), [(20.0, "PASS"), (60.0, "SHORT")])
def test_the_counters_cost_per_row_is_extrapolated_to_the_default_sweep(
    tmp_path: Path, counters_s: float, verdict: str
) -> None:
    """(counters step − plain subset) / rows, times the sweep's 92 ok rows, on top of the sweep's wall time."""
    rows = counters_rows()
    write_step(tmp_path, "subset", 12.0)
    write_step(tmp_path, "counters_range", counters_s, rows)
    write_step(
        tmp_path,
        "sweep1",
        90.0,
        pd.read_csv(recorded("20261126T070612Z-default-gpu") / "results.csv"),
        "20261126T070612Z-default-gpu",
    )
    answer = {a.question: a for a in evidence.answers(tmp_path)}["counters' cost per row"]
    per_row = (counters_s - 12.0) / 16
    assert answer.figure == f"{per_row:.1f} s a row; default sweep with counters ≈ {90 + per_row * 92:.0f} s"
    assert answer.verdict == verdict


@pytest.mark.parametrize(("wall_s", "samples", "verdict"), [(85.0, 8, "PASS"), (101.0, 8, "SHORT"), (85.0, 2, "SHORT")])
def test_the_sweep_passes_under_100_s_with_every_ok_row_at_its_samples(
    tmp_path: Path, wall_s: float, samples: int, verdict: str
) -> None:
    rows = pd.read_csv(recorded("20261126T070612Z-default-gpu") / "results.csv")
    rows.loc[rows["status"] == "ok", "samples"] = 9
    rows.loc[rows.index[0], "samples"] = samples
    write_step(tmp_path, "sweep1", wall_s, rows, "20261126T070612Z-default-gpu")
    answer = {a.question: a for a in evidence.answers(tmp_path)}["default sweep wall time"]
    assert answer.verdict == verdict and answer.figure.startswith(f"{wall_s:.1f} s wall")


def energy_rows(power_w: float, spread: float) -> pd.DataFrame:
    rows = replay_case(counters_rows())
    return rows.assign(
        energy_per_call_j=0.3,
        average_power_w=power_w,
        energy_window_s=2.1,
        energy_uncertainty=0.1 / 2.1,
        energy_spread=spread,
        tokens_per_joule=1e4,
    )


@pytest.mark.parametrize(
    ("power_w", "spread", "verdict"), [(650.0, 0.01, "PASS"), (650.0, 0.08, "SHORT"), (760.0, 0.01, "SHORT")]
)
def test_energy_rows_must_resolve_with_a_spread_under_their_uncertainty(
    tmp_path: Path, power_w: float, spread: float, verdict: str
) -> None:
    """The rule of results/energy.py on the 700 W H100: 760 W over 2.1 s is no measurement."""
    write_step(tmp_path, "subset", 12.0)
    write_step(tmp_path, "energy", 12.0 + 2 * 3 * 2.15, energy_rows(power_w, spread))
    found = {a.question: a for a in evidence.answers(tmp_path)}
    assert found["energy per call"].verdict == verdict
    assert found["energy windows' cost"].figure == "2.15 s a window (6 windows)"
    assert found["energy windows' cost"].verdict == "PASS"


def fp8_rows(fp8_ms: float) -> pd.DataFrame:
    fused = replay_case(counters_rows()).query("impl == 'fused'")
    fp8 = fused.assign(impl="fused_fp8", latency_ms=fp8_ms, roofline_source="datasheet:H100 SXM (fp8 tensor rate)")
    return pd.concat([fused, fp8])


@pytest.mark.parametrize(("fp8_ms", "verdict"), [(0.8, "PASS"), (1.5, "SHORT")])
def test_fp8_rows_must_beat_fused_on_the_fp8_roof(tmp_path: Path, fp8_ms: float, verdict: str) -> None:
    write_step(tmp_path, "fp8", 15.0, fp8_rows(fp8_ms))
    answer = {a.question: a for a in evidence.answers(tmp_path)}["fp8 rows at n = 8192"]
    assert answer.verdict == verdict
    assert f"{1.094184 / fp8_ms:.2f}×" in answer.figure


def test_gpu_check_runs_only_the_checks_asked_for(tmp_path: Path) -> None:
    from mhabench.checks import gpu

    assert gpu.main(["--out", str(tmp_path), "--only", *evidence_run.CHECKS]) == 0
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    names = [c["name"] for c in report["checks"]]
    assert sorted(names) == sorted(evidence_run.CHECKS) and names == [n for n in gpu.CHECKS if n in names]


def test_the_command_end_to_end_on_a_fake_gpu_leaves_plan_answers_and_outputs_in_the_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """main() with CUDA faked and every step writing its recorded outputs at once: one archive with plan.json
    (estimates from the package, actual times), answers.txt, and each step's files."""
    monkeypatch.setattr(evidence_run, "cuda_available", lambda: True)
    instant = {step.name: 0.0 for step in steps()}
    monkeypatch.setattr(
        evidence_run, "ProcessRunner", lambda work: FakeGpu(FakeClock(), instant, work, RECORDED_OUTPUTS)
    )
    archive = tmp_path / "out" / "gpu-evidence.tgz"
    assert evidence_run.main(["--archive", str(archive), "--work", str(tmp_path / "w"), "--configs", str(CONFIGS)]) == 0
    out = capsys.readouterr().out
    assert out.count("DONE ") == len(RECORDED_OUTPUTS) and "archive: " in out
    root = evidence.unpack(archive, tmp_path / "x")
    plan = json.loads((root / "plan.json").read_text())
    assert len(plan["steps"]) == len(steps()) and plan["budget_s"] == 480.0
    packaged = evidence_estimates.packaged_estimates()
    first_of_kind = {s["kind"]: s for s in reversed(plan["steps"])}.values()  # later ones: priced by the first's time
    assert all(s["estimate_s"] == packaged[s["kind"]].seconds for s in first_of_kind)
    assert (root / "answers.txt").read_text().count("\n") == len(evidence.QUESTIONS)
    assert (root / "checks" / "gpu_check.json").is_file()
    assert (root / "sweep1" / "20261126T070612Z-default-gpu" / "results.parquet").is_file()  # raw samples
    assert (root / "counters_kernel" / COUNTERS_RUN / "kernels.csv").is_file()


def test_a_previous_archive_prices_each_kind_by_its_measured_wall_time(recorded_archive: Path) -> None:
    """The next budget is better: a kind the last run finished is priced at its time there (sweep1's 121.6 s)."""
    estimates = evidence_run.load_estimates(None, CONFIGS, recorded_archive)
    assert estimates["sweep"].seconds == pytest.approx(121.562) and "sweep1's wall time in" in estimates["sweep"].basis
    assert estimates["checks"].seconds == pytest.approx(evidence_estimates.packaged_estimates()["checks"].seconds)
    assert estimates["energy"] == evidence_estimates.packaged_estimates()["energy"]  # it wrote nothing: failed


def test_a_previous_that_is_no_archive_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x.tgz").write_text("no")
    assert evidence_run.main(["--previous", str(tmp_path / "x.tgz"), "--work", str(tmp_path / "w")]) == 2
    assert capsys.readouterr().err.startswith(f"--previous {tmp_path / 'x.tgz'}: not a gpu-evidence archive")
