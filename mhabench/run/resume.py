"""``run --resume RUN``: may this run folder be finished here, and with which config?

A killed run keeps every finished row (``mhabench.results.store.RunWriter``); resuming measures only the missing
(case, implementation, repeat) triples and appends them. That is only sound when the new rows are
comparable with the old ones, so :func:`prepare_resume` checks, before anything runs, that this
machine has the same mhabench, torch, result format and device as the manifest recorded, and that
the recorded config still validates and still describes the rows in the folder. A run whose process
is alive is never resumed (two writers would interleave rows); a complete run has nothing to resume.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from mhabench.errors import InputError, MhabenchError, quote
from mhabench.impls import core_implementations
from mhabench.measure.peaks import device_name
from mhabench.results.liveness import effective_status
from mhabench.results.manifest import Manifest, Shard
from mhabench.results.schema import FORMAT_VERSION
from mhabench.results.store import MANIFEST_NAME, finished_rows, read_manifest, resolve_run
from mhabench.run.executors import is_remote, planning_device
from mhabench.scenario import plugins
from mhabench.scenario.cases import count_cases, expand_cases
from mhabench.scenario.config import RunConfig
from mhabench.scenario.device import canonical_device
from mhabench.scenario.limits import check_row_count
from mhabench.scenario.loading import parse_config
from mhabench.version import __version__


class NothingToResumeError(MhabenchError):
    """The run is complete. Exit 0: resuming is idempotent, so a retry loop may always call it."""

    exit_code = 0


@dataclasses.dataclass(frozen=True)
class ResumePlan:
    """What :func:`mhabench.run.runner.run` needs to finish ``run_dir``, and why it may run."""

    run_dir: Path
    config: RunConfig
    """Re-validated from the manifest, with the run's plugins loaded again."""
    differences: tuple[str, ...] = ()
    """Why rows measured now would not be comparable with the folder's; non-empty only under ``--force``."""
    shard: Shard | None = None
    """The shard the run measured (``--shard I/N``): resuming measures the same one."""


def prepare_resume(ref: str, results_root: Path, force: bool) -> ResumePlan:
    """Check that the run ``ref`` (folder, run id or ``latest``) can be finished here; one-line errors.

    Raises :class:`InputError` (exit 2) for a live run (always), an unreadable or foreign folder, a
    config that no longer validates, or incomparable rows (unless ``force``), and
    :class:`NothingToResumeError` (exit 0) for a complete run.
    """
    run_dir = resolve_run(ref, results_root)
    data = read_manifest(run_dir)
    older_format = format_difference(run_dir, data)  # a newer format is refused before the rest is read
    manifest = Manifest.parse(data, run_dir / MANIFEST_NAME)
    _check_status(run_dir, manifest)
    plugins.load_plugin_files(manifest.plugins)
    config = _recorded_config(run_dir, manifest)
    device = planning_device(config)  # a cluster run's workers' device, which this driver need not have
    differences = (
        *older_format,
        *environment_differences(manifest, device, devices=not is_remote(config)),
        *foreign_rows(run_dir, config, device, manifest.repeats),
    )
    if differences and not force:
        raise InputError(
            f"{run_dir}: cannot resume: {'; '.join(differences)} (rows measured now would not be comparable; "
            "--force resumes anyway)"
        )
    return ResumePlan(run_dir, config, differences, manifest.shard)


def _check_status(run_dir: Path, manifest: Manifest) -> None:
    """A live run is refused, a complete one has nothing to resume, an unfinished benchmark run may go on."""
    status = effective_status(manifest)
    if status == "running":
        raise InputError(
            f"{run_dir}: still running (pid {manifest.pid} on {manifest.host}); resume it after that process has ended"
        )
    if status == "complete":
        raise NothingToResumeError(f"nothing to resume: {run_dir} is complete")
    if manifest.kind == "probe":
        raise InputError(f"{run_dir}: a probe run cannot be resumed; run `mhabench probe` again")


def _recorded_config(run_dir: Path, manifest: Manifest) -> RunConfig:
    """The manifest's resolved config, validated again by this mhabench (errors name the manifest)."""
    if manifest.config is None:
        raise InputError(f"{run_dir / MANIFEST_NAME}: no config recorded; this run cannot be resumed")
    return parse_config(manifest.config, str(run_dir / MANIFEST_NAME))


def format_difference(run_dir: Path, manifest: dict[str, Any]) -> list[str]:
    """An older result format is a difference (``--force`` rewrites the rows in this one); a newer one is refused."""
    version = manifest.get("format_version", 1)
    if type(version) is not int or version > FORMAT_VERSION:
        raise InputError(
            f"{run_dir}: written in result format version {quote(version)}; this mhabench writes version "
            f"{FORMAT_VERSION} and cannot resume it"
        )
    return [f"result format version {version} then, {FORMAT_VERSION} now"] if version != FORMAT_VERSION else []


def environment_differences(manifest: Manifest, device: torch.device, devices: bool = True) -> list[str]:
    """What of mhabench, torch and the device differs from the manifest's record, one phrase each (``devices``
    False: mhabench and torch only, for a cluster run, whose workers' devices each row records)."""
    recorded = manifest.environment
    now: dict[str, str] = {"mhabench_version": __version__, "torch": torch.__version__}
    if devices:
        now.update(device=canonical_device(device), device_kind=device.type, device_name=device_name(device))
    return [
        f"{key} {quote(recorded.get(key), 60)} then, {quote(value, 60)} now"
        for key, value in now.items()
        if recorded.get(key) != value
    ]


def foreign_rows(run_dir: Path, config: RunConfig, device: torch.device, repeats: int) -> list[str]:
    """Rows in the folder that the recorded config does not produce here (its cases are named otherwise)."""
    names = config.implementations or core_implementations()
    check_row_count(count_cases(config, device) * repeats, len(names), config.max_rows)  # before expanding
    expected = {
        (case.case_id, name, repeat)
        for case in expand_cases(config, device)
        for name in names
        for repeat in range(repeats)
    }
    foreign = [
        row for row in finished_rows(run_dir) if (row.case.case_id, row.case.impl, row.case.repeat) not in expected
    ]
    if not foreign:
        return []
    first = foreign[0].case
    return [f"{len(foreign)} row(s) are not cases of the recorded config (e.g. {quote(first.case_id)} {first.impl})"]
