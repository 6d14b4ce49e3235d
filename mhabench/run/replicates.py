"""``replicates: N`` (``run --replicates N``): one config run as N independent processes, one after another.

A ratio measured in one process carries that process's state: allocator history, thread placement,
clocks, whatever else the machine ran meanwhile. Paired rounds cancel what changes *within* the
process, nothing of what changes *between* processes, so a pick with a tight interval can flip in
the next run (docs/findings/replication.md). A replicated run measures that movement instead of
assuming it away: replicate *i* is a process of its own (``python -m mhabench.cli_replicate``, or on the
CPU a fork of the command's process that has imported everything and measured nothing: :func:`can_fork`) running
the same resolved config with its own case order (replicate 0 keeps the config's order, replicate *i* > 0 a
permutation seeded by *i*), so no case always runs first, on a cold allocator, or last, after the others warmed
the machine. The first replicate's roofs are handed to the others (the merged run keeps those only).

The replicates write their own folders under ``<run folder>/.replicates/``; once they end, their rows
are merged into the run folder with replicate *i* as ``repeat`` *i* (the column every view already
groups by, so no new column: ``replicates`` in the manifest says the repeats are processes), and the
replicates' folders are removed. The manifest keeps each replicate's run id, times, status, drift and
case order seed under ``replicated_from``. A replicate that fails ends the run: the rows of those
that finished are merged, the run is ``failed``, and the error names the replicate's log; Ctrl-C
merges what finished as ``interrupted``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from mhabench.errors import InputError, MhabenchError
from mhabench.results.columns import REPEAT
from mhabench.results.lifecycle import run_folder
from mhabench.results.manifest import Ending, Manifest
from mhabench.results.merge import write_rows
from mhabench.results.schema import ResultRow
from mhabench.results.store import MANIFEST_NAME, Run, load_run, new_run_dir, stored_frame, typed_rows
from mhabench.run.estimate import processes_left_s
from mhabench.run.shard import folder_name
from mhabench.scenario.cases import Case
from mhabench.scenario.config import RunConfig
from mhabench.scenario.device import resolve_device

REPLICATES_FOLDER = ".replicates"
"""Where the replicates' own run folders live while the run is being measured."""
LOG_TAIL_CHARS = 300
"""How much of a failed replicate's log its error line quotes."""


class ReplicateFailedError(MhabenchError):
    """A replicate process ended with an error; the rows of the replicates that finished are on disk."""


@dataclasses.dataclass(frozen=True)
class Replicate:
    """Which replicate this process is (``run --replicate I/N``, passed by the parent): its case order seed."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclasses.dataclass(frozen=True)
class ReplicateProgress:
    """Where a replicated run stands: ``done`` of ``count`` processes ended (0: none started yet), the one run folder
    their rows are merged into (the processes' own folders are temporary), the last process's wall time and the
    time the rest should take (:func:`processes_left_s`)."""

    done: int
    count: int
    run_dir: Path
    seconds: float = 0.0
    left_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class ReplicatedResult:
    """The merged run as this process wrote it (typed rows, raw samples included, and the final manifest): what the
    run summary and the short answer read, without reading the folder back."""

    run: Run
    warnings: tuple[str, ...] = ()

    @property
    def run_dir(self) -> Path:
        return self.run.path

    @property
    def rows(self) -> list[ResultRow]:
        return self.run.rows

    @property
    def manifest(self) -> Manifest:
        return self.run.manifest

    @property
    def frame(self) -> pd.DataFrame:
        return self.run.frame


def parse_replicate(text: str) -> Replicate:
    """``I/N`` with 0 ≤ I < N: the replicate a child process is."""
    index, _, count = text.partition("/")
    try:
        parsed = Replicate(int(index), int(count))
    except ValueError:
        raise InputError(f"--replicate: {text!r} is not I/N") from None
    if not 0 <= parsed.index < parsed.count:
        raise InputError(f"--replicate: {text!r} needs 0 <= I < N")
    return parsed


def case_order(cases: Sequence[Case], seed: int) -> list[Case]:
    """The cases in the order replicate ``seed`` runs them: the config's order for 0, else a seeded permutation."""
    if seed == 0:
        return list(cases)
    order = np.random.default_rng(seed).permutation(len(cases))
    return [cases[int(position)] for position in order]


def run_replicated(
    config: RunConfig,
    out_root: Path,
    argv: list[str],
    plugin_files: Sequence[str] = (),
    report: Callable[[ReplicateProgress], None] = lambda progress: None,
    replicate_main: ReplicateMain | None = None,
) -> ReplicatedResult:
    """Run ``config`` as ``config.replicates`` child processes, one after another; merge their rows into one folder.

    ``report`` is told before the first process and as each one ends (the CLI prints a line, with the time left).
    With ``replicate_main`` a CPU run's replicates are forks of this process that call it (:func:`can_fork`), else
    fresh interpreters. Raises
    :class:`ReplicateFailedError` after merging what finished when a replicate fails.
    """
    started = dt.datetime.now(dt.timezone.utc)
    run_dir = new_run_dir(out_root, folder_name(config.name, None), started)
    work = run_dir / REPLICATES_FOLDER
    work.mkdir()
    config_file = work / "config.json"
    config_file.write_text(json.dumps(config.model_copy(update={"replicates": 1}).model_dump(mode="json")))
    roofline = work / "roofline.json"
    fork = replicate_main if replicate_main is not None and can_fork(resolve_device(config.device)) else None
    finished: list[Path] = []
    failure: str | None = None
    report(ReplicateProgress(0, config.replicates, run_dir))
    took_s: list[float] = []
    try:
        for index in range(config.replicates):
            replicate = Replicate(index, config.replicates)
            shared = roofline if roofline.exists() else None
            start_s = time.monotonic()
            folder, failure = _run_child(
                config_file, work / f"replicate-{index}", replicate, plugin_files, shared, fork=fork
            )
            took_s.append(time.monotonic() - start_s)
            if folder is not None:
                finished.append(folder)
            if failure is not None:
                break
            if shared is None:  # the first replicate's roofs: the later ones do not probe them again
                _write_roofline(folder, roofline)
            left_s = processes_left_s(config.replicates, took_s)
            report(ReplicateProgress(index + 1, config.replicates, run_dir, took_s[-1], left_s))
    except KeyboardInterrupt:  # Ctrl-C reaches the child too; what finished is merged before stopping
        _merge(run_dir, _folders(work), argv, started, config.replicates, "interrupted")
        raise
    merged = _merge(run_dir, finished, argv, started, config.replicates, "failed" if failure else "complete")
    if failure is not None:
        raise ReplicateFailedError(f"{failure}; the rows of {len(finished)} replicate(s) are in {run_dir}")
    shutil.rmtree(work, ignore_errors=True)
    return ReplicatedResult(merged)


def child_command(
    config_file: Path, out_root: Path, replicate: Replicate, plugin_files: Sequence[str], roofline: Path | None = None
) -> list[str]:
    """The command line of one replicate: a fresh interpreter running the resolved config as replicate I/N
    (:mod:`mhabench.cli_replicate`, which imports the runner only), with the roofs an earlier replicate measured."""
    plugins = [part for path in plugin_files for part in ("--plugin", path)]
    command = [sys.executable, "-m", "mhabench.cli_replicate", str(config_file), str(out_root), str(replicate)]
    return [*command, *(["--roofline", str(roofline)] if roofline else []), *plugins]


def _write_roofline(folder: Path, target: Path) -> None:
    """The finished replicate's roofs (its manifest's ``roofline``) into ``target``, for the next replicates."""
    roofline = json.loads((folder / MANIFEST_NAME).read_text()).get("roofline") or {}
    if roofline:
        target.write_text(json.dumps(roofline))


def _run_child(
    config_file: Path,
    out_root: Path,
    replicate: Replicate,
    plugin_files: Sequence[str],
    roofline: Path | None = None,
    fork: ReplicateMain | None = None,
) -> tuple[Path | None, str | None]:
    """Run one replicate (with ``fork``, that entry point in a fork of this process); its run folder (None if it made
    none) and why it failed (None when it did not)."""
    out_root.mkdir()
    log = out_root.with_suffix(".log")
    command = child_command(config_file, out_root, replicate, plugin_files, roofline)
    if fork is not None:
        code = _forked(command, log, fork)
    else:
        with log.open("w") as sink:
            code = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT).returncode
    folders = _folders(out_root.parent)
    folder = next((path for path in folders if path.parent == out_root), None)
    if code == 0 and folder is not None:
        return folder, None
    tail = " ".join(log.read_text(errors="replace").split())[-LOG_TAIL_CHARS:]
    return folder, f"replicate {replicate} exited with status {code} ({log}: …{tail})"


def can_fork(device: torch.device) -> bool:
    """Whether a replicate may be a fork of this process: on the CPU where ``fork`` exists (Linux), and only while
    this process has run no torch op (no thread pool, no allocator history to inherit). CUDA cannot be used in a
    fork once a parent touched it, so a CUDA run starts fresh interpreters."""
    return device.type == "cpu" and "fork" in multiprocessing.get_all_start_methods()


ReplicateMain = Callable[[list[str]], int]
"""The replicate's entry point (:func:`mhabench.cli_replicate.main`), given by the command line that imported it:
called with the replicate's arguments in a fork, it returns the exit status."""


def _forked(command: list[str], log: Path, main: ReplicateMain) -> int | None:
    """``command`` (``python -m mhabench.cli_replicate …``) run as ``main`` in a fork of this process, which has
    imported torch and mhabench already: the same program as a fresh interpreter without its seconds of imports.
    The fork's output goes to ``log``; its exit status is returned."""
    sys.stdout.flush()
    sys.stderr.flush()
    process = multiprocessing.get_context("fork").Process(target=_in_fork, args=(command, str(log), main))
    process.start()
    process.join()
    return process.exitcode


def _in_fork(command: list[str], log: str, main: ReplicateMain) -> None:
    """In the fork: output to ``log``, ``sys.argv`` the replicate's command line (its manifest records it), then
    ``main`` on its arguments."""
    sink = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    os.close(sink)
    sys.argv = command
    sys.exit(main(command[3:]))


def _folders(work: Path) -> list[Path]:
    """The replicates' run folders that have a manifest, in replicate order."""
    found = [path.parent for path in work.glob(f"replicate-*/*/{MANIFEST_NAME}")]
    return sorted(found, key=lambda folder: int(folder.parent.name.removeprefix("replicate-")))


def _merge(
    run_dir: Path, folders: Sequence[Path], argv: list[str], started: dt.datetime, count: int, status: Ending
) -> Run:
    """The replicates' rows in ``run_dir`` (replicate i as repeat i) under a manifest that names them all."""
    runs = [load_run(folder) for folder in folders]
    frames = [stored_frame(run.path).assign(**{REPEAT: index}) for index, run in enumerate(runs)]
    stored = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if len(stored):
        stored["run_id"] = run_dir.name
    first: dict[str, Any] = runs[0].manifest.as_dict() if runs else {}
    kept = {key: value for key, value in first.items() if key not in ("replicate", "run_id", "drift")}
    manifest = Manifest.model_validate(
        {
            **kept,
            "command": argv,
            "started_at": started.isoformat(),
            "repeats": count,
            "replicates": count,
            "replicated_from": [_provenance(index, run.manifest.as_dict()) for index, run in enumerate(runs)],
        }
    )
    ends = [run.manifest.finished_at for run in runs if run.manifest.finished_at]
    with run_folder(run_dir, manifest, finished_as=status, finished_at=max(ends, default=None)):
        if len(stored):
            write_rows(run_dir, stored)  # the replicates' cells as they wrote them
    # the rows as the folder now holds them, typed; run_folder has brought the manifest to its final status
    return Run(run_dir, manifest, typed_rows(stored) if len(stored) else [])


def _provenance(index: int, manifest: dict[str, Any]) -> dict[str, Any]:
    """What the merged manifest keeps of one replicate: its id, times, status, drift and case order seed."""
    keys = ("run_id", "status", "started_at", "finished_at", "drift")
    return {"replicate": index, "case_order_seed": index, **{key: manifest.get(key) for key in keys}}


def check_replicable(replicates: int, repeat: int, shard: object | None, launch: object | None) -> None:
    """Replicates are whole runs of the config in fresh processes: not with ``--repeat``, ``--shard`` or torchrun."""
    if replicates <= 1:
        return
    one = f"the config runs {replicates} replicates (independent processes); pass --replicates 1"
    if repeat > 1:
        raise InputError(f"--repeat: {one} to repeat the sweep within one process")
    if shard is not None:
        raise InputError(f"--shard: {one} to run a shard")
    if launch is not None:
        raise InputError(f"torchrun: {one} (each rank is already a process of its own)")
