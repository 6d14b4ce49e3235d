"""The steps of ``make gpu-evidence``, their order by value per second, and the budget rule that runs or skips them.

Each step answers some of docs/gpu.md's open questions ("What the next GPU run must show"); its ``value`` is how
many, weighted by what the others need from it, and its price is its estimate (:mod:`evidence_estimates`, or a
finished step of the same kind: the second sweep is priced at the first's wall time). :func:`run_plan` takes, each
time, the step with the most value per second among those whose needs have run, and runs it when its estimate
fits in what is left of the budget, under a time limit of exactly what is left, so a step that overruns its
estimate is cut at the budget (its process group killed) and never past it. A step that does not fit is skipped
and says so; cheaper ones may still run after it. The clock and the step runner are parameters, so every decision
is tested against the recorded timings without a GPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from mhabench.checks.evidence_estimates import Estimate

PLAN = "plan.json"
"""The plan's file in the work folder and the archive: every step's estimate, basis, status and wall time."""
ARCHIVE_ROOT = "gpu-evidence"
"""The archive's top folder."""
RESERVE_S = 3.0
"""Kept back from every step's limit for killing an overrunning step's processes and writing the archive last."""


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: the commands it runs (argv lists, given the work folder), what it answers and what it needs."""

    name: str
    kind: str
    """Steps of one kind take about as long: a finished one's wall time prices the next."""
    value: float
    answers: tuple[str, ...]
    commands: Callable[[Path], list[list[str]]]
    needs: tuple[str, ...] = ()
    bundle: tuple[str, ...] = ()
    """Steps that make this one worth running and must fit with it (a sweep for the spread is worth nothing
    without the spread read over it)."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a step runner reports: the exit status of the last command run, and whether the limit cut it."""

    returncode: int
    timed_out: bool = False


class Clock(Protocol):
    def now(self) -> float: ...


class StepRunner(Protocol):
    def __call__(self, step: Step, limit_s: float) -> Outcome: ...


@dataclasses.dataclass
class Record:
    """A step's line in plan.json: its estimate and basis, what happened, and its actual wall time."""

    name: str
    kind: str
    answers: tuple[str, ...]
    estimate_s: float
    basis: str
    status: str = "not run"
    reason: str = ""
    actual_s: float | None = None
    limit_s: float | None = None
    returncode: int | None = None


DONE, FAILED, TIMED_OUT, SKIPPED = "done", "failed", "timed out", "skipped"


def price(step: Step, estimates: dict[str, Estimate], records: Sequence[Record]) -> Estimate:
    """The step's estimate: the last finished step of its kind's wall time, else the recorded estimate."""
    finished = [r for r in records if r.kind == step.kind and r.status == DONE and r.actual_s is not None]
    if finished:
        last = finished[-1]
        return Estimate(float(last.actual_s or 0.0), f"{last.name}'s wall time on this machine")
    return estimates[step.kind]


def next_step(pending: list[Step], estimates: dict[str, Estimate], records: Sequence[Record]) -> Step | None:
    """The pending step with the most value per estimated second among those whose needs are done."""
    done = {r.name for r in records if r.status == DONE}
    ready = [s for s in pending if set(s.needs) <= done]
    if not ready:
        return None
    return max(ready, key=lambda s: s.value / max(price(s, estimates, records).seconds, 1.0))


def run_plan(
    steps: Sequence[Step],
    estimates: dict[str, Estimate],
    budget_s: float,
    started_s: float,
    clock: Clock,
    runner: StepRunner,
    after_step: Callable[[list[Record]], None] = lambda records: None,
    report: Callable[[Record], None] = lambda record: None,
) -> list[Record]:
    """Run what fits of ``steps`` by value per second within ``budget_s`` counted from ``started_s``; every
    step ends as done, failed, timed out or skipped (with the reason), and ``report`` sees it; ``after_step``
    sees the records so far after each step that ran (the archive is rewritten there, never for a skip, so
    skipping costs no time)."""
    records: list[Record] = []
    pending = list(steps)
    while pending:
        step = next_step(pending, estimates, records)
        if step is None:
            break
        pending.remove(step)
        estimate = price(step, estimates, records)
        record = Record(step.name, step.kind, step.answers, estimate.seconds, estimate.basis)
        records.append(record)
        left_s = budget_s - (clock.now() - started_s) - RESERVE_S
        bundled = [s for s in pending if s.name in step.bundle]
        needed_s = estimate.seconds + sum(price(s, estimates, records).seconds for s in bundled)
        if needed_s > left_s:
            with_them = "".join(f" with {s.name}" for s in bundled)
            record.status, record.reason = SKIPPED, f"needs ~{needed_s:.0f} s{with_them}, {max(left_s, 0):.0f} s left"
            report(record)
            continue
        start = clock.now()
        record.limit_s = left_s
        outcome = runner(step, left_s)
        record.actual_s, record.returncode = clock.now() - start, outcome.returncode
        record.status = TIMED_OUT if outcome.timed_out else DONE if outcome.returncode == 0 else FAILED
        if outcome.timed_out:
            record.reason = f"cut at the budget after {record.actual_s:.0f} s (estimate {estimate.seconds:.0f} s)"
        report(record)
        after_step(records)
    done = {r.name for r in records if r.status == DONE}
    for step in pending:
        missing = ", ".join(n for n in step.needs if n not in done)
        estimate = price(step, estimates, records)
        records.append(
            Record(step.name, step.kind, step.answers, estimate.seconds, estimate.basis, SKIPPED, f"needs {missing}")
        )
        report(records[-1])
    return records
