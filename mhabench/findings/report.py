"""A page's check report: every claim graded against every run it was checked on, stored beside the page.

The report is what ``mhabench claims check`` writes (``docs/findings/<page>.claims.json``); a page's claim
sentences and the findings README's table are rendered from it, never typed. Grading the runs it names
again gives the same report (``tests/test_findings_claims.py``), so it cannot drift from its runs.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from mhabench.findings.claims import Claim
from mhabench.findings.grade import Grade, Level, evidence, grade
from mhabench.findings.reading import read_case
from mhabench.results.store import Run

REPORT_SUFFIX = ".claims.json"
DEFAULT_CONFIG = "default"


class RunRecord(BaseModel):
    """A run a page was checked on: when it started, which config, what code and machine."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    config: str
    started_at: str
    commit: str | None
    dirty: bool | None
    machine: str
    torch: str
    processes: int


class GradeRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    grade: Grade
    pair: tuple[str, str]
    """The speedup quoted: ``pair[0]`` over ``pair[1]``."""
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    per_process: list[float]
    picked: str


class ClaimRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claim: Claim
    grades: list[GradeRecord]
    level: Level


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid")

    page: str
    checked_at: str
    runs: list[RunRecord]
    claims: list[ClaimRecord]

    def claim(self, claim_id: str) -> ClaimRecord | None:
        return next((one for one in self.claims if one.claim.id == claim_id), None)

    def run(self, run_id: str) -> RunRecord:
        return next(one for one in self.runs if one.run_id == run_id)

    @property
    def failed(self) -> list[ClaimRecord]:
        """Claims some run contradicted."""
        return [one for one in self.claims if any(g.grade == Grade.DOES_NOT_HOLD for g in one.grades)]


def config_of(run: Run) -> str:
    """The scenario file a run ran (its file name), or ``default`` for the embedded default."""
    command = run.manifest.command
    found = (
        [part for part in command[command.index("run") + 1 :] if part.endswith((".yaml", ".yml"))]
        if ("run" in command)
        else []
    )
    return Path(found[0]).name if found else DEFAULT_CONFIG


def config_name(config: str) -> str:
    """A claim's config as :func:`config_of` spells it."""
    return DEFAULT_CONFIG if config == DEFAULT_CONFIG else Path(config).name


def runs_as_claimed(claim: Claim, run: Run) -> bool:
    """The run is of the claim's config, with the threads and allocator the claim fixes (if it fixes them)."""
    environment = run.manifest.environment
    return (
        config_of(run) == config_name(claim.config)
        and (claim.threads is None or environment.get("threads") == claim.threads)
        and (claim.allocator is None or environment.get("allocator") == claim.allocator)
    )


def started(run: RunRecord) -> dt.datetime:
    return dt.datetime.fromisoformat(run.started_at)


def run_record(run: Run) -> RunRecord:
    manifest = run.manifest
    environment = manifest.environment
    # an implementation whose code lives outside a repository (a library's function) records no commit
    versions = [version for version in manifest.code.values() if version.get("repo")]
    commits = {version.get("commit") for version in versions} or {environment.get("git_commit")}
    dirty = any(bool(version.get("dirty")) for version in versions) if versions else None
    name = environment.get("device_name") or environment.get("cpu_model") or "?"
    machine = f"{name}, {environment.get('threads', '?')} threads"
    return RunRecord(
        run_id=run.run_id,
        config=config_of(run),
        started_at=manifest.started_at or "",
        commit=next(iter(commits)) if len(commits) == 1 else None,
        dirty=dirty,
        machine=machine,
        torch=str(environment.get("torch", "?")),
        processes=manifest.replicates if manifest.replicated else 1,
    )


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def grade_claim(claim: Claim, runs: Sequence[Run]) -> ClaimRecord:
    """The claim graded on each of ``runs`` of its config (in start order), and the level that supports."""
    mine = sorted(
        (run for run in runs if runs_as_claimed(claim, run)),
        key=lambda run: run.manifest.started_at or "",
    )
    grades = []
    for run in mine:
        measured = grade(claim, read_case(run, claim.case))
        grades.append(
            GradeRecord(
                run_id=run.run_id,
                grade=measured.grade,
                pair=measured.pair,
                ratio=_number(measured.ratio),
                ci_low=_number(measured.ci_low),
                ci_high=_number(measured.ci_high),
                per_process=[round(value, 6) for value in measured.per_process],
                picked=measured.picked,
            )
        )
    starts = {
        run.run_id: dt.datetime.fromisoformat(run.manifest.started_at or "1970-01-01T00:00:00+00:00") for run in mine
    }
    level = evidence([(starts[one.run_id], one.grade) for one in grades])
    return ClaimRecord(claim=claim, grades=grades, level=level)


def build_report(page: str, claims: Sequence[Claim], runs: Sequence[Run], checked_at: dt.datetime) -> Report:
    """Every claim of ``page`` graded on ``runs``; the runs listed are those of the claims' configs."""
    wanted = {config_name(claim.config) for claim in claims}
    used = sorted((run for run in runs if config_of(run) in wanted), key=lambda run: run.manifest.started_at or "")
    return Report(
        page=page,
        checked_at=checked_at.isoformat(timespec="seconds"),
        runs=[run_record(run) for run in used],
        claims=[grade_claim(claim, used) for claim in claims],
    )


def report_path(page: Path) -> Path:
    return page.with_name(page.stem + REPORT_SUFFIX)


def save(report: Report, path: Path) -> None:
    path.write_text(json.dumps(report.model_dump(mode="json"), indent=1) + "\n")


def load(path: Path) -> Report:
    data: Any = json.loads(path.read_text())
    return Report.model_validate(data)
