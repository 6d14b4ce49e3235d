"""``mhabench bisect GOOD BAD --config … --plugin …``: the first commit of a plugin's repository whose point
has stepped (asv find).

Each commit is checked out into one temporary git worktree (the user's checkout is never touched) and
the config runs there in a fresh ``mhabench run`` process: a plugin registers its implementations once
per process, and a new process per commit also keeps one commit's allocator history out of the next.
Its rows go to a history store, so every measured commit is a point like any other. The search is a
bisection on the commit list between GOOD and BAD (``git rev-list --ancestry-path``): a commit whose point
lies nearer BAD's level than GOOD's (in log distance) is bad. ``log2(n)`` runs instead of ``n``.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from mhabench.analysis.verdict import Change
from mhabench.errors import InputError, MhabenchError
from mhabench.history import store
from mhabench.history.provenance import repository_version
from mhabench.history.series import METRICS, Point, Series, Step, build, level_change

RUN_TIMEOUT_S = 3600


class BisectError(MhabenchError):
    """A commit could not be measured (its run failed), or BAD is not clearly slower than GOOD (exit 1)."""


@dataclasses.dataclass(frozen=True)
class BisectResult:
    series: Series
    """The series bisected (the case and implementation whose GOOD → BAD change is largest)."""
    first_bad: str
    measured: dict[str, Point]
    step: Step
    """GOOD's level → BAD's, judged by the one rule."""

    def lines(self) -> list[str]:
        """Each measured commit's point (the first bad one marked), then the verdict with GOOD → BAD's size."""
        marked = [
            f"{point.label}  {point.value:.4f}{'  <- first bad' if point.commit == self.first_bad else ''}"
            for point in self.measured.values()
        ]
        step = self.step
        return [
            *marked,
            f"first bad commit: {self.first_bad} ({self.series.name}: GOOD → BAD {step.size:.3f}×, "
            f"interval {step.low:.3f}–{step.high:.3f}, {step.change.value})",
        ]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise InputError(f"bisect: git {' '.join(args)}: {last}")
    return done.stdout.strip()


def commits_between(repo: Path, good: str, bad: str) -> list[str]:
    """GOOD, then every commit on the path from GOOD to BAD, oldest first (BAD last)."""
    good_sha, bad_sha = _git(repo, "rev-parse", f"{good}^{{commit}}"), _git(repo, "rev-parse", f"{bad}^{{commit}}")
    path = _git(repo, "rev-list", "--reverse", "--ancestry-path", f"{good_sha}..{bad_sha}").split()
    if not path:
        raise InputError(f"bisect: {bad} is not a descendant of {good} in {repo}")
    return [good_sha, *path]


def run_command(config: Path, plugin: Path, out: Path, history: Path) -> list[str]:
    """The ``mhabench run`` one commit is measured with (in a fresh interpreter)."""
    run = [sys.executable, "-m", "mhabench", "run", str(config), "--plugin", str(plugin)]
    return [*run, "--out", str(out), "--history", str(history)]


def _measure_in(
    worktree: Path, relative: Path, config: Path, scratch: Path, history: Path, runs: int
) -> Callable[[str], None]:
    """Measure a commit ``runs`` times: its runs pool into one point, steadier than any one run."""

    def measure(commit: str) -> None:
        _git(worktree, "checkout", "--quiet", "--detach", commit)
        command = run_command(config, worktree / relative, scratch / "runs", history)
        for _ in range(runs):
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:  # one line, like every other failure, never a traceback
                raise BisectError(f"bisect: the run at {commit[:10]} took over {RUN_TIMEOUT_S} s") from None
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                raise BisectError(f"bisect: the run at {commit[:10]} failed (exit {done.returncode}): {last}")

    return measure


DEFAULT_RUNS = 3
"""Runs per measured commit: one run on a busy machine can land nearer the wrong end (docs/findings/history.md)."""


def bisect(
    good: str,
    bad: str,
    config: Path,
    plugin: Path,
    impl: str | None,
    threshold: float,
    history: Path | None,
    runs: int = DEFAULT_RUNS,
) -> BisectResult:
    """Measure GOOD and BAD, then bisect between them; the first bad commit and every point measured."""
    version = repository_version(plugin.resolve())
    if version["repo"] is None:
        raise InputError(f"--plugin: {plugin} is not a file a git repository tracks")
    repo = Path(version["repo"])
    relative = plugin.resolve().relative_to(repo)
    commits = commits_between(repo, good, bad)
    scratch = Path(tempfile.mkdtemp(prefix="mhabench-bisect-"))
    store_dir = history or scratch / "history"
    worktree = scratch / "worktree"
    try:
        _git(repo, "worktree", "add", "--quiet", "--detach", str(worktree), commits[0])
        measure = _measure_in(worktree, relative, config.resolve(), scratch, store_dir, runs)
        return _search(commits, measure, lambda: _series_of(store_dir, impl, threshold), threshold)
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(worktree)], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


def _series_of(directory: Path, impl: str | None, threshold: float) -> list[Series]:
    runs, rows = store.read(directory)
    return list(build(runs, rows, METRICS["ratio"], threshold, impls=[impl] if impl else []).series)


def _point(series: Series, commit: str) -> Point | None:
    return next((point for point in series.points if point.commit == commit), None)


def _search(
    commits: list[str], measure: Callable[[str], None], read: Callable[[], list[Series]], threshold: float
) -> BisectResult:
    measure(commits[0])
    measure(commits[-1])
    chosen = _largest_change(read(), commits[0], commits[-1])
    good_point, bad_point = _point(chosen, commits[0]), _point(chosen, commits[-1])
    step = level_change([good_point], [bad_point], threshold, {})
    if step.change is not Change.SLOWER:  # a search on noise would still name a commit: refuse instead
        raise BisectError(
            f"bisect: BAD is not clearly slower than GOOD ({chosen.name}: {step.size:.3f}×, interval "
            f"{step.low:.3f}–{step.high:.3f}, {step.change.value}); measure more (--runs) or pool with --history DIR"
        )
    low, high = 0, len(commits) - 1
    while high - low > 1:
        middle = (low + high) // 2
        measure(commits[middle])
        series = next(s for s in read() if _identity(s) == _identity(chosen))
        value = _point(series, commits[middle]).value
        nearer_bad = abs(math.log(value / bad_point.value)) < abs(math.log(value / good_point.value))
        low, high = (low, middle) if nearer_bad else (middle, high)
    final = next(s for s in read() if _identity(s) == _identity(chosen))
    measured = {point.commit: point for point in final.points if point.commit in commits}
    return BisectResult(final, commits[high], measured, step)


def _identity(series: Series) -> tuple:
    return series.case_id, series.impl, series.fingerprint, series.baseline


def _largest_change(series: list[Series], good: str, bad: str) -> Series:
    """The series with both ends measured whose GOOD → BAD ratio is furthest from 1."""
    both = [s for s in series if _point(s, good) and _point(s, bad)]
    if not both:
        raise BisectError("bisect: no implementation has a ratio at both GOOD and BAD (is the plugin in the config?)")
    return max(both, key=lambda s: abs(math.log(_point(s, bad).value / _point(s, good).value)))
