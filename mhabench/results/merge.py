"""``mhabench merge``: the N shard runs of one sweep (``run --shard I/N``) back into one run folder.

The merged folder is an ordinary run, written through the same lifecycle as any other
(:func:`mhabench.results.lifecycle.run_folder`): ``compare``, ``report`` and ``run --resume`` read it
like a run measured in one go. Its status is ``complete`` when every shard completed. ``--force`` may
merge shards that did not; the merged run then lacks their missing rows exactly as they do, so it
ends as they did: ``failed`` if one failed, else ``interrupted`` (``run --resume`` on the merged
folder measures what is missing). ``merged_from`` keeps each shard's status and times, ``forced``
the disagreements that ``--force`` let through.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mhabench.errors import InputError, OutputFolderError
from mhabench.results.columns import SAMPLES_COLUMN
from mhabench.results.lifecycle import run_folder
from mhabench.results.manifest import Ending, Manifest, Shard
from mhabench.results.store import CSV_NAME, PARQUET_NAME, Run, load_run, stored_frame

ROW_KEY = ["case_id", "impl", "repeat"]
"""The columns that name one row; a merged run holds each at most once."""


@dataclasses.dataclass(frozen=True)
class ShardRun:
    """One shard's run folder, with its manifest typed and its ``shard`` entry checked."""

    run: Run
    manifest: Manifest
    shard: Shard

    @property
    def path(self) -> Path:
        return self.run.path


@dataclasses.dataclass(frozen=True)
class MergeResult:
    """The merged run folder, its rows, its status, and the disagreements ``--force`` let through."""

    run_dir: Path
    frame: pd.DataFrame
    forced: list[str]
    status: Ending


def merge_runs(run_dirs: Sequence[Path], out_dir: Path, force: bool = False) -> MergeResult:
    """Combine the shard runs ``run_dirs`` into one run at ``out_dir``.

    Refused with one line: a shard missing or given twice, a (case, implementation) row in two
    shards, and — unless ``force`` — shards whose config, mhabench version or device differ, or
    that did not complete. Rows keep shard order; their ``run_id`` becomes the merged run's.
    """
    if not run_dirs:
        raise InputError("merge: name the shard run folders to merge")
    shards = sorted((shard_run(Path(path)) for path in run_dirs), key=lambda s: s.shard.index)
    _check_shard_set(shards)
    forced = _disagreements(shards) + _unfinished(shards)
    if forced and not force:
        raise InputError(f"merge: {forced[0]}; pass --force to merge anyway")
    rows = pd.concat([stored_frame(s.path) for s in shards], ignore_index=True)
    _check_no_duplicates(rows)
    _prepare_out_dir(out_dir)
    rows["run_id"] = out_dir.name
    status = merged_status(shards)
    finished = [s.manifest.finished_at for s in shards if s.manifest.finished_at]
    with run_folder(
        out_dir, _merged_manifest(shards, rows, forced), finished_as=status, finished_at=max(finished, default=None)
    ):
        write_rows(out_dir, rows)
    return MergeResult(out_dir, rows, forced, status)


def shard_run(path: Path) -> ShardRun:
    """The run at ``path``, which must be a shard (its manifest records ``shard: {index, count}``)."""
    run = load_run(path)
    manifest = run.manifest
    if manifest.shard is None:
        raise InputError(f"{run.path}: not a shard (its manifest has no 'shard': {{index, count}})")
    return ShardRun(run, manifest, manifest.shard)


def merged_status(shards: Sequence[ShardRun]) -> Ending:
    """``complete`` when every shard completed; else ``failed`` if one failed, else ``interrupted``
    (a shard stopped early, is still running, or recorded no status)."""
    statuses = {s.manifest.status for s in shards}
    if statuses == {"complete"}:
        return "complete"
    return "failed" if "failed" in statuses else "interrupted"


def _facts(shard: ShardRun) -> dict[str, str]:
    """What must agree between shards: the config, the mhabench version and the device kind."""
    environment = shard.manifest.environment
    return {
        "config": json.dumps(shard.manifest.config, sort_keys=True),
        "mhabench_version": str(environment.get("mhabench_version")),
        "device_kind": str(environment.get("device_kind")),
        "device_name": str(environment.get("device_name")),
    }


def _disagreements(shards: Sequence[ShardRun]) -> list[str]:
    first = _facts(shards[0])
    found = []
    for shard in shards[1:]:
        for field, value in _facts(shard).items():
            if value != first[field]:
                shown = "differs" if field == "config" else f"is {value!r}, not {first[field]!r}"
                found.append(f"{shard.path}: {field} {shown} (as in {shards[0].path})")
    return found


def _check_shard_set(shards: Sequence[ShardRun]) -> None:
    """One run per shard index, all of the same count, none missing."""
    counts = {s.shard.count for s in shards}
    if len(counts) > 1:
        raise InputError(f"merge: the runs split the sweep differently (shard counts {sorted(counts)})")
    count = counts.pop()
    seen: dict[int, Path] = {}
    for shard in shards:
        if shard.shard.index in seen:
            raise InputError(f"merge: shard {shard.shard} given twice ({seen[shard.shard.index]} and {shard.path})")
        seen[shard.shard.index] = shard.path
    missing = [f"{index}/{count}" for index in range(count) if index not in seen]
    if missing:
        raise InputError(f"merge: missing shard(s) {', '.join(missing)} of {count}")


def _unfinished(shards: Sequence[ShardRun]) -> list[str]:
    return [
        f"{s.path}: shard {s.shard} is {s.manifest.status!r}, not 'complete'"
        for s in shards
        if s.manifest.status != "complete"
    ]


def _check_no_duplicates(rows: pd.DataFrame) -> None:
    repeated = rows[rows.duplicated(ROW_KEY, keep=False)]
    if len(repeated):
        first = repeated.iloc[0]
        raise InputError(
            f"merge: row {first['case_id']} / {first['impl']} appears in more than one shard "
            f"({len(repeated)} duplicated rows)"
        )


def _prepare_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise OutputFolderError(f"--out: {out_dir} already exists and is not an empty folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputFolderError(f"--out: cannot create {out_dir} ({exc.strerror})") from None


def _provenance(shard: ShardRun) -> dict[str, Any]:
    """Where one shard came from and how it ended, kept in the merged manifest (each ran on its own machine)."""
    return {
        "run_id": shard.manifest.run_id or shard.path.name,
        "path": str(shard.path),
        "shard": str(shard.shard),
        "status": shard.manifest.status,
        "started_at": shard.manifest.started_at,
        "finished_at": shard.manifest.finished_at,
        "environment": shard.manifest.environment,
    }


def _merged_manifest(shards: Sequence[ShardRun], rows: pd.DataFrame, forced: list[str]) -> Manifest:
    """The first shard's manifest, re-labelled: it describes the union of the shards, from the first one's start.

    The lifecycle replaces what describes the writing process (status, liveness)."""
    data = {key: value for key, value in shards[0].manifest.as_dict().items() if key != "shard"}
    started = [s.manifest.started_at for s in shards if s.manifest.started_at]
    return Manifest.model_validate(
        {
            **data,
            "cases": int(rows["case_id"].nunique()),
            "started_at": min(started, default=None),
            "merged_from": [_provenance(s) for s in shards],
            "forced": forced,
        }
    )


def write_rows(out_dir: Path, rows: pd.DataFrame) -> None:
    """results.csv (no raw samples) and results.parquet (with them)."""
    rows.drop(columns=[SAMPLES_COLUMN], errors="ignore").to_csv(out_dir / CSV_NAME, index=False)
    rows.to_parquet(out_dir / PARQUET_NAME, index=False)
