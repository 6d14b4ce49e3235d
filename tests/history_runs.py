"""Synthetic run folders for the history tests: a plugin at a given commit with a known ratio to naive."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from synthetic_runs import rounds, row, write_run

PLUGIN = "my_attention"


def commit_run(
    root: Path,
    name: str,
    commit: str,
    commit_time: int,
    ratio: float,
    *,
    seed: int = 0,
    dirty: bool = False,
    started_at: str | None = None,
    **environment: Any,
) -> Path:
    """A run of naive and the plugin in interleaved rounds, the plugin ``ratio`` × naive, at ``commit``
    (and ``fused`` at half naive's time where the environment asks for ``with_fused``)."""
    medians = {"naive": 1.0, PLUGIN: ratio, **({"fused": 0.5} if environment.pop("with_fused", False) else {})}
    samples = rounds(medians, count=20, drift=0.2, noise=0.01, seed=seed)
    rows = [row(impl, times, run_id=name) for impl, times in samples.items()]
    run_dir = write_run(root, name, rows, **environment)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["code"] = {
        "naive": {"repo": "/src/mhabench", "commit": "mhabench0", "commit_time": 1, "dirty": False},
        PLUGIN: {"repo": "/src/plugin", "commit": commit, "commit_time": commit_time, "dirty": dirty},
    }
    manifest["started_at"] = started_at or f"2026-01-01T00:00:{seed % 60:02d}+00:00"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def timeline(root: Path, ratios: list[float], runs_per_commit: int = 1, **environment: Any) -> list[Path]:
    """One commit per ratio (c0, c1, …, in time order), ``runs_per_commit`` runs each."""
    folders = []
    for index, ratio in enumerate(ratios):
        for run in range(runs_per_commit):
            seed = index * 10 + run
            name = f"run-{environment.get('torch', 'x')}-{index:02d}-{run}"
            folders.append(commit_run(root, name, f"c{index:02d}", 1000 + index, ratio, seed=seed, **environment))
    return folders


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS`` with a throwaway identity; its stdout, stripped (the provenance and bisect tests)."""
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
