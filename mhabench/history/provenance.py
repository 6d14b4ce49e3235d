"""Which code a row measured: the git commit (and whether the tree was dirty) of the repository that
holds each implementation's source file.

A plugin's rows are the plugin's code, so they carry the plugin repository's commit; a built-in's rows
carry this project's. The answer is recorded in the manifest when the run starts (``code``), because
by the time a run folder is imported into a history the repositories may have moved on.
"""

from __future__ import annotations

import inspect
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mhabench.impls.registry import ImplSpec

GIT_TIMEOUT_S = 10
UNKNOWN_COMMIT = "unknown"
"""The commit of rows whose code was in no git repository, or whose run recorded none."""


def _git(repo_dir: Path, *args: str) -> str | None:
    """One git command's output in ``repo_dir`` (None when git is missing, fails or times out)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(repo_dir), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


NO_VERSION: dict[str, Any] = {"repo": None, "commit": None, "commit_time": None, "dirty": None}
"""Code no repository versions: outside any, or a file its repository does not track."""


def _tracked_names(folder: Path) -> set[str]:
    """The files git tracks in ``folder`` (relative names): a file it does not track is not that commit's code."""
    listed = _git(folder, "ls-files", "--", ".")
    return set(listed.splitlines()) if listed else set()


def repository_version(path: Path) -> dict[str, Any]:
    """The repository holding ``path``: its top folder, HEAD commit, commit time (Unix s) and dirtiness.

    Dirty means tracked files differ from HEAD (``git status --porcelain --untracked-files=no``): an
    untracked scratch file beside the code does not change what ran. Outside a repository every value is
    None, and the rows are keyed under :data:`UNKNOWN_COMMIT`; so is a file the repository does not track
    (an ignored ``.venv`` inside a project, an uncommitted plugin): its commit says nothing of that code.
    """
    folder = path if path.is_dir() else path.parent
    if not path.is_dir() and path.name not in _tracked_names(folder):
        return dict(NO_VERSION)
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top is None:
        return dict(NO_VERSION)
    commit = _git(folder, "rev-parse", "HEAD")
    time_text = _git(folder, "log", "-1", "--format=%ct")
    status = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return {
        "repo": top,
        "commit": commit,
        "commit_time": int(time_text) if time_text and time_text.isdigit() else None,
        "dirty": None if status is None else bool(status),
    }


def source_file(spec: ImplSpec) -> Path | None:
    """The file an implementation's factory is defined in (None for one built at run time without a file)."""
    try:
        found = inspect.getsourcefile(spec.factory)
    except (TypeError, OSError):
        return None
    return Path(found).resolve() if found else None


def code_versions(specs: Iterable[ImplSpec]) -> dict[str, dict[str, Any]]:
    """Per implementation name: the version of the repository its source file lives in (git asked once per folder)."""
    by_folder: dict[Path, tuple[dict[str, Any], set[str]]] = {}
    versions: dict[str, dict[str, Any]] = {}
    for spec in specs:
        path = source_file(spec)
        if path is None:
            versions[spec.name] = dict(NO_VERSION)
            continue
        if path.parent not in by_folder:
            by_folder[path.parent] = (repository_version(path.parent), _tracked_names(path.parent))
        version, tracked = by_folder[path.parent]
        versions[spec.name] = version if path.name in tracked else dict(NO_VERSION)
    return versions
