"""``python -m mhabench.checks.evidence_run``: docs/gpu.md's open GPU questions, answered within one time budget.

``make gpu-evidence BUDGET=480 OUT=…`` runs it after installing the project (``make gpu-site``). The steps
(:func:`evidence_steps`) run by value per second under :func:`mhabench.checks.evidence_plan.run_plan`, each in
its own process group with a limit of what is left of the budget. After every step the work folder (each step's
log and outputs: run folders with raw samples, kernels.csv, gpu_check.json, the calibration; plan.json with every
step's estimate, basis, status and actual wall time) is packed into one archive, written to a temporary file
and renamed over the last, so a command cut off at any point leaves every finished step's evidence. At the end
``python -m mhabench.checks.evidence ARCHIVE``'s answers are printed and packed too.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from mhabench.checks import evidence, evidence_estimates
from mhabench.checks.evidence_estimates import ENERGY_WINDOWS, Estimate
from mhabench.checks.evidence_plan import ARCHIVE_ROOT, PLAN, Outcome, Record, Step, run_plan

ARCHIVE_NAME = "gpu-evidence.tgz"
ANSWERS = "answers.txt"
CHECKS = ("energy", "dram_copy", "fused_hardware_flops", "fp8_attention")
"""gpu-check's checks whose new form no GPU has run yet (docs/gpu.md, "What the next GPU run must show", 1)."""
KILL_GRACE_S = 2.0
CACHE_ENV = "MHABENCH_CACHE_DIR"


def _run(python: str, out: Path, *extra: str) -> list[str]:
    return [python, "-m", "mhabench", "run", *extra, "--out", str(out)]


def sweep_runs(work: Path, names: tuple[str, ...]) -> list[str]:
    """The run folders the named sweep steps wrote, in step order."""
    return [str(manifest.parent) for name in names for manifest in sorted((work / name).glob("*/manifest.json"))]


def _spread(python: str, sweeps: tuple[str, ...]) -> Callable[[Path], list[list[str]]]:
    """spread, advise and calibrate over the run folders the named sweeps wrote (found when the step starts)."""

    def commands(work: Path) -> list[list[str]]:
        runs = sweep_runs(work, sweeps)
        froms = [arg for run in runs for arg in ("--from", run)]
        return [
            [python, "-m", "mhabench", "spread", *runs],
            [python, "-m", "mhabench", "advise", *runs, "--format", "md"],
            [python, "-m", "mhabench", "calibrate", *froms],
        ]

    return commands


def evidence_steps(python: str, configs: Path) -> list[Step]:
    """Every step, with its value: the questions it answers, weighted by what the others need from it."""
    subset, kernel, fp8 = (str(configs / f"gpu-evidence-{name}.yaml") for name in ("subset", "kernel-replay", "fp8"))
    checks = [python, "-m", "mhabench.checks.gpu", "--configs", str(configs), "--only", *CHECKS]
    return [
        Step(
            "checks",
            "checks",
            5,
            ("energy", "dram_copy", "range_flops", "fp8_check"),
            lambda w: [[*checks, "--out", str(w / "checks")]],
        ),
        Step("sweep1", "sweep", 8, ("sweep_wall",), lambda w: [_run(python, w / "sweep1")]),
        Step("subset", "subset", 1, ("counters_cost", "energy_cost"), lambda w: [_run(python, w / "subset", subset)]),
        Step(
            "counters_range",
            "counters_range",
            2,
            ("counters_range", "counters_cost"),
            lambda w: [_run(python, w / "counters_range", subset, "--counters", "hardware")],
        ),
        Step(
            "counters_kernel",
            "counters_kernel",
            1,
            ("replay_bytes",),
            lambda w: [_run(python, w / "counters_kernel", kernel, "--counters", "hardware")],
        ),
        Step(
            "energy",
            "energy",
            2,
            ("energy_rows", "energy_cost"),
            lambda w: [_run(python, w / "energy", subset, "--energy-windows", str(ENERGY_WINDOWS))],
        ),
        Step("fp8", "fp8", 1, ("fp8_rows",), lambda w: [_run(python, w / "fp8", fp8)]),
        Step(
            "sweep2",
            "sweep",
            2,
            ("spread", "calibration"),
            lambda w: [_run(python, w / "sweep2")],
            ("sweep1",),
            ("spread2",),
        ),
        Step("spread2", "spread", 1, ("spread", "calibration"), _spread(python, ("sweep1", "sweep2")), ("sweep2",)),
        Step(
            "sweep3",
            "sweep",
            0.5,
            ("spread", "calibration"),
            lambda w: [_run(python, w / "sweep3")],
            ("sweep2",),
            ("spread3",),
        ),
        Step(
            "spread3",
            "spread",
            0.5,
            ("spread", "calibration"),
            _spread(python, ("sweep1", "sweep2", "sweep3")),
            ("sweep3",),
        ),
    ]


@dataclasses.dataclass(frozen=True)
class ProcessRunner:
    """Runs a step's commands one after another in the repository root, each in a process group of its own
    (killed whole at the limit), stdout and stderr into ``work/<step>/log.txt``."""

    work: Path

    def __call__(self, step: Step, limit_s: float) -> Outcome:
        folder = self.work / step.name
        folder.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + limit_s
        env = {**os.environ, CACHE_ENV: str(folder / "cache")}
        returncode = 0
        with (folder / "log.txt").open("a", encoding="utf-8") as log:
            for command in step.commands(self.work):
                log.write(f"$ {' '.join(command)}\n")
                log.flush()
                done = run_limited(command, deadline - time.monotonic(), log, env)
                if done.timed_out:
                    return done
                returncode = returncode or done.returncode
        return Outcome(returncode)


def run_limited(command: list[str], limit_s: float, log: IO[str], env: dict[str, str]) -> Outcome:
    """One command in a new session; at the limit its whole process group gets SIGTERM, then SIGKILL."""
    if limit_s <= 0:
        return Outcome(-1, timed_out=True)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        return Outcome(process.wait(timeout=limit_s))
    except subprocess.TimeoutExpired:
        for sig, wait_s in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        return Outcome(process.wait(), timed_out=True)


def write_plan(work: Path, records: list[Record], header: dict[str, object]) -> None:
    steps = [dataclasses.asdict(record) for record in records]
    (work / PLAN).write_text(json.dumps({**header, "steps": steps}, indent=2), encoding="utf-8")


def write_archive(work: Path, archive: Path) -> None:
    """The work folder as ``gpu-evidence/…`` in a gzip tar, written beside ``archive`` and renamed over it."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(work, arcname=ARCHIVE_ROOT)
    os.replace(partial, archive)


def skipped(step: Step, estimate: Estimate, reason: str) -> Record:
    return Record(step.name, step.kind, step.answers, estimate.seconds, estimate.basis, "skipped", reason)


class WallClock:
    def now(self) -> float:
        return time.time()


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def load_estimates(runs: Path | None, configs: Path, previous: Path | None = None) -> dict[str, Estimate]:
    """From the recorded runs when given (``shared/runs``), else the packaged ones computed from them; each kind
    a previous archive finished is priced at its wall time there instead (the estimate the last run measured)."""
    found = evidence_estimates.recorded_estimates(runs, configs) if runs else evidence_estimates.packaged_estimates()
    return {**found, **(measured_estimates(previous) if previous else {})}


def measured_estimates(archive: Path) -> dict[str, Estimate]:
    """Per step kind, the wall time of its first finished step in a previous gpu-evidence archive."""
    with tarfile.open(archive, "r:gz") as tar:
        member = tar.extractfile(f"{ARCHIVE_ROOT}/{PLAN}")
        if member is None:
            raise ValueError(f"{archive}: no {PLAN}")
        plan = json.loads(member.read().decode("utf-8"))
    measured: dict[str, Estimate] = {}
    for step in plan["steps"]:
        if step["status"] == "done" and step["kind"] not in measured:
            measured[step["kind"]] = Estimate(float(step["actual_s"]), f"{step['name']}'s wall time in {archive}")
    return measured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mhabench.checks.evidence_run", description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for everything, install included")
    parser.add_argument("--started-at", type=float, default=None, help="epoch seconds the budget counts from")
    parser.add_argument("--archive", type=Path, default=Path(ARCHIVE_NAME), help="the archive to (re)write")
    parser.add_argument("--work", type=Path, default=Path("build/gpu-evidence"), help="the steps' work folder")
    parser.add_argument("--configs", type=Path, default=Path("configs"))
    parser.add_argument("--recorded", type=Path, default=None, help="price steps from these recorded runs")
    parser.add_argument("--previous", type=Path, default=None, help="price steps by a previous archive's times")
    args = parser.parse_args(argv)
    if args.budget <= 0:
        print(f"--budget {args.budget:g}: must be a positive number of seconds", file=sys.stderr)
        return 2
    try:
        estimates = load_estimates(args.recorded, args.configs, args.previous)
    except (OSError, tarfile.TarError, ValueError, KeyError) as exc:
        print(f"--previous {args.previous}: not a gpu-evidence archive ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    started = args.started_at if args.started_at is not None else time.time()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    header = {"budget_s": args.budget, "started_at": started, "command": sys.argv, "python": sys.executable}
    steps = evidence_steps(sys.executable, args.configs)

    def report(record: Record) -> None:
        actual = "-" if record.actual_s is None else f"{record.actual_s:.0f} s"
        line = f"{record.status.upper():9} {record.name}: estimate {record.estimate_s:.0f} s, actual {actual}"
        print(f"{line} {record.reason}".rstrip(), flush=True)

    def after_step(records: list[Record]) -> None:
        write_plan(args.work, records, header)
        write_archive(args.work, args.archive)

    if not cuda_available():
        records = [skipped(step, estimates[step.kind], "no CUDA device") for step in steps]
        print("gpu-evidence: SKIP (no CUDA device); every step skipped", flush=True)
    else:
        records = run_plan(
            steps, estimates, args.budget, started, WallClock(), ProcessRunner(args.work), after_step, report
        )
    write_plan(args.work, records, header)
    answers = evidence.render(evidence.answers(args.work))
    (args.work / ANSWERS).write_text(answers, encoding="utf-8")
    write_archive(args.work, args.archive)
    print(answers, end="")
    print(f"archive: {args.archive} ({time.time() - started:.0f} s of a {args.budget:.0f} s budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
