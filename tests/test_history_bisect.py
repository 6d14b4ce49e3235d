"""``mhabench bisect``: the commit list from git, and the search on measured points (fakes for the runs)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from history_runs import git
from typer.testing import CliRunner

from mhabench.analysis.verdict import Change
from mhabench.cli import app
from mhabench.errors import InputError
from mhabench.history.bisect import BisectError, _search, commits_between, run_command
from mhabench.history.series import Point, Series
from mhabench.results.fingerprint import Fingerprint

FINGERPRINT = Fingerprint.of({"torch": "2.13.0"})


def fake_history(values: dict[str, float]) -> tuple[list[str], object, object]:
    """A measure() that records which commits ran, and a read() that returns their points as one series."""
    measured: list[str] = []

    def measure(commit: str) -> None:
        measured.append(commit)

    def read() -> list[Series]:
        points = tuple(
            Point(c, False, values[c], values[c] * 0.98, values[c] * 1.02, (values[c],), c)
            for c in values
            if c in measured
        )
        return [Series("case/1", "case 1", "my_attention", FINGERPRINT, points, ())]

    return measured, measure, read


@pytest.mark.parametrize("first_bad", range(1, 9))
def test_bisect_names_the_first_slower_commit_in_about_log2_runs(first_bad: int) -> None:
    commits = [f"c{i}" for i in range(9)]
    values = {c: (0.5 if i < first_bad else 0.75) for i, c in enumerate(commits)}
    measured, measure, read = fake_history(values)
    found = _search(commits, measure, read, threshold=0.10)
    assert found.first_bad == f"c{first_bad}"
    assert measured[:2] == ["c0", "c8"] and len(measured) <= 2 + 3  # GOOD, BAD, then log2(8) middles
    assert found.step.change is Change.SLOWER and found.step.size == pytest.approx(1.5)


def test_bisect_refuses_when_bad_is_not_clearly_slower_than_good() -> None:
    """On noise a search would still name a commit; it stops after GOOD and BAD instead."""
    commits = [f"c{i}" for i in range(5)]
    measured, measure, read = fake_history(dict.fromkeys(commits, 0.5))
    with pytest.raises(BisectError, match=r"BAD is not clearly slower than GOOD .*1\.000×.*same"):
        _search(commits, measure, read, threshold=0.10)
    assert measured == ["c0", "c4"]


def test_commits_between_good_and_bad_in_order(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    shas = []
    for index in range(4):
        (tmp_path / "plugin.py").write_text(f"x = {index}\n")
        git(tmp_path, "add", "plugin.py")
        git(tmp_path, "commit", "-qm", f"c{index}")
        shas.append(git(tmp_path, "rev-parse", "HEAD"))
    assert commits_between(tmp_path, shas[0], "HEAD") == shas
    with pytest.raises(InputError, match="is not a descendant"):
        commits_between(tmp_path, "HEAD", shas[0])


def test_each_commit_runs_in_a_fresh_mhabench_process_with_the_worktrees_plugin(tmp_path: Path) -> None:
    command = run_command(Path("c.yaml"), tmp_path / "wt" / "p.py", tmp_path / "out", tmp_path / "h")
    assert command[1:4] == ["-m", "mhabench", "run"]
    assert command[command.index("--plugin") + 1] == str(tmp_path / "wt" / "p.py")
    assert command[command.index("--history") + 1] == str(tmp_path / "h")


def test_bisect_refuses_a_plugin_outside_git_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text("x = 1\n")
    config = tmp_path / "c.yaml"
    config.write_text("scenarios: [{name: s, seq_len: 8, d_model: 16, heads: 2}]\n")
    done = CliRunner().invoke(app, ["bisect", "a", "b", "--config", str(config), "--plugin", str(tmp_path / "p.py")])
    assert done.exit_code == 2 and "is not a file a git repository tracks" in done.stderr


def test_bisect_names_what_git_refused_in_one_plain_line(tmp_path: Path) -> None:
    repo = tmp_path / "plugin"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "p.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(repo), "add", "p.py"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "p"], check=True
    )
    config = tmp_path / "c.yaml"
    config.write_text("scenarios: [{name: s, seq_len: 8, d_model: 16, heads: 2}]\n")
    args = ["bisect", "no-such-commit", "HEAD", "--config", str(config), "--plugin", str(repo / "p.py")]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 2 and "bisect: git rev-parse no-such-commit" in done.stderr, done.output
    assert "['" not in done.stderr and done.stderr.count("\n") == 1


def test_a_commit_whose_run_hangs_is_one_line_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mhabench.history.bisect as bisect_module

    def hangs(command: list[str], **kwargs: object) -> None:
        if command[0] == "git":
            return subprocess.CompletedProcess(command, 0, "", "")  # type: ignore[return-value]
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])  # type: ignore[arg-type]

    monkeypatch.setattr(bisect_module.subprocess, "run", hangs)
    measure = bisect_module._measure_in(tmp_path, Path("p.py"), Path("c.yaml"), tmp_path, tmp_path / "h", 1)
    with pytest.raises(BisectError, match="took over"):
        measure("0123456789abcdef")
