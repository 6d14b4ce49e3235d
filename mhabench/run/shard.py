"""Sharded sweeps: split a run's (case, implementation) pairs over N machines, then merge the runs.

The cluster's own job arrays (Slurm ``--array``, a Kubernetes indexed Job) start the N shards;
mhabench only has to make every shard pick the same, balanced split without talking to the
others, and to put the N run folders back together.

The split is longest-processing-time-first: pairs in decreasing predicted time, each to the shard
with the least predicted work so far. It is a greedy schedule whose longest shard is within 4/3
of the best possible one, and it is deterministic: ties are broken by the pair's key and the
lowest shard index, and the predicted times come from the cost model with fixed nominal peaks, not
from the machine, so every machine computes the same split from the same config.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from mhabench.errors import InputError, OutputFolderError
from mhabench.impls.registry import ImplSpec
from mhabench.results.store import CSV_NAME, MANIFEST_NAME, PARQUET_NAME, SAMPLES_COLUMN, Run, load_run
from mhabench.run.steps import workload
from mhabench.scenario.config import Case, RunConfig, expand_cases

Pair = tuple[str, str]
"""``(case key, implementation name)``: one (case, implementation) of a sweep, every repeat of it."""

ROW_KEY = ["case_id", "impl", "repeat"]
"""The columns that name one row; a merged run holds each at most once."""

# Nominal peaks for predicted times. Only ratios between pairs matter for balance, and using the
# same constants everywhere is what makes every machine compute the same split.
NOMINAL_PEAK_FLOPS_PER_S = 1e12
NOMINAL_PEAK_BYTES_PER_S = 100e9


@dataclasses.dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (``--shard I/N``, 0-based)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"I/N"`` with 0 ≤ I < N → :class:`Shard`; anything else is a one-line :class:`InputError`."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise InputError(f"--shard: expected I/N such as 0/4 (got {text!r})")
    index, count = int(match[1]), int(match[2])
    if count < 1 or index >= count:
        raise InputError(f"--shard: need 0 ≤ I < N and N ≥ 1 (got {text!r})")
    return Shard(index, count)


def predicted_pair_s(
    flops: float,
    bytes_moved: float,
    *,
    min_run_time_s: float,
    max_run_time_s: float,
    min_samples: int,
    untimed_calls: int = 4,
) -> float:
    """Predicted wall time of measuring one pair, from its cost-model FLOPs and bytes.

    One call takes the nominal roofline time, max(FLOPs / peak FLOP/s, bytes / peak B/s). The
    timer then runs for at least ``min_run_time_s`` and at most ``max_run_time_s``, longer than the
    minimum only when ``min_samples`` calls do not fit in it; the check, memory and warm-up calls
    (``untimed_calls``) come on top. So small pairs cost about the same each and large ones cost
    by their size, which is why balancing by count or by FLOPs alone would both be wrong.
    """
    call_s = max(flops / NOMINAL_PEAK_FLOPS_PER_S, bytes_moved / NOMINAL_PEAK_BYTES_PER_S)
    timed_s = min(max(min_run_time_s, min_samples * call_s), max_run_time_s)
    return timed_s + untimed_calls * call_s


def assign_shards(predicted_s: Mapping[Pair, float], count: int) -> list[list[Pair]]:
    """Longest-processing-time-first: each pair, slowest first, to the least loaded shard.

    Ties between pairs go by their key, ties between shards to the lowest index, so the result
    depends only on the predicted times. Each shard's pairs are returned sorted by key.
    """
    if count < 1:
        raise ValueError(f"shard count must be at least 1 (got {count})")
    loads = [(0.0, index) for index in range(count)]  # a heap of (predicted seconds, shard index)
    shards: list[list[Pair]] = [[] for _ in range(count)]
    for pair in sorted(predicted_s, key=lambda p: (-predicted_s[p], p)):
        load, index = heapq.heappop(loads)
        shards[index].append(pair)
        heapq.heappush(loads, (load + predicted_s[pair], index))
    return [sorted(pairs) for pairs in shards]


def shard_pairs(predicted_s: Mapping[Pair, float], shard: Shard) -> set[Pair]:
    """The pairs ``shard`` runs; the runner keeps its usual order and skips the others."""
    return set(assign_shards(predicted_s, shard.count)[shard.index])


def predicted_times(config: RunConfig, device: torch.device, specs: Sequence[ImplSpec]) -> dict[Pair, float]:
    """Predicted seconds of every (case, implementation) of ``config``, from each one's cost model.

    An implementation without a cost model (a bare plugin) is priced as a call of no work: the
    timer's minimum plus nothing. The untimed calls are the warm-up runs, the checked call and the
    memory call.
    """
    timing = config.timing
    predicted = {}
    for case in expand_cases(config, device):
        for spec in specs:
            cost = spec.cost(workload(case)) if spec.cost else None
            predicted[(case.case_id, spec.name)] = predicted_pair_s(
                cost.flops if cost else 0,
                cost.bytes_moved if cost else 0,
                min_run_time_s=timing.min_run_time_s,
                max_run_time_s=timing.max_run_time_s,
                min_samples=timing.min_samples,
                untimed_calls=timing.warmup_runs + 2,
            )
    return predicted


def shard_selector(
    config: RunConfig, device: torch.device, specs: Sequence[ImplSpec], shard: Shard
) -> Callable[[Case, str, int], bool]:
    """``select`` for the runner: does ``shard`` measure (case, implementation name, repeat)?

    Every repeat of a pair goes to the same shard, so ``--repeat N`` compares runs on one machine
    and a merged run holds each (case, implementation, repeat) once.
    """
    chosen = shard_pairs(predicted_times(config, device, specs), shard)
    return lambda case, impl, repeat: (case.case_id, impl) in chosen


def folder_name(config_name: str | None, shard_entry: Mapping[str, Any] | None) -> str:
    """A run folder's name: the config's, with ``-shard-I-of-N`` for a shard so the shards sort together."""
    suffix = f"-shard-{shard_entry['index']}-of-{shard_entry['count']}" if shard_entry else ""
    return (config_name or "run") + suffix


# --- merging ---------------------------------------------------------------------------------


def manifest_shard(manifest: Mapping[str, Any], where: object) -> Shard:
    """The ``shard`` entry of a run's manifest; a one-line error when it has none or it is damaged."""
    info = manifest.get("shard")
    try:
        return Shard(int(info["index"]), int(info["count"]))  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        raise InputError(f"{where}: not a shard (its manifest has no 'shard': {{index, count}})") from None


def _shard(run: Run) -> Shard:
    return manifest_shard(run.manifest, run.path)


@dataclasses.dataclass(frozen=True)
class MergeResult:
    """The merged run folder, its rows, and the disagreements ``--force`` let through."""

    run_dir: Path
    rows: pd.DataFrame
    forced: list[str]


def _facts(run: Run) -> dict[str, str]:
    """What must agree between shards: the config, the mhabench version and the device kind."""
    environment = run.manifest.get("environment") or {}
    return {
        "config": json.dumps(run.manifest.get("config"), sort_keys=True),
        "mhabench_version": str(environment.get("mhabench_version")),
        "device_kind": str(environment.get("device_kind")),
        "device_name": str(environment.get("device_name")),
    }


def _disagreements(runs: Sequence[Run]) -> list[str]:
    first = _facts(runs[0])
    found = []
    for run in runs[1:]:
        for field, value in _facts(run).items():
            if value != first[field]:
                shown = "differs" if field == "config" else f"is {value!r}, not {first[field]!r}"
                found.append(f"{run.path}: {field} {shown} (as in {runs[0].path})")
    return found


def _check_shard_set(runs: Sequence[Run]) -> None:
    """One run per shard index, all of the same count, none missing."""
    counts = {_shard(run).count for run in runs}
    if len(counts) > 1:
        raise InputError(f"merge: the runs split the sweep differently (shard counts {sorted(counts)})")
    count = counts.pop()
    seen: dict[int, Path] = {}
    for run in runs:
        if _shard(run).index in seen:
            raise InputError(f"merge: shard {_shard(run)} given twice ({seen[_shard(run).index]} and {run.path})")
        seen[_shard(run).index] = run.path
    missing = [f"{index}/{count}" for index in range(count) if index not in seen]
    if missing:
        raise InputError(f"merge: missing shard(s) {', '.join(missing)} of {count}")


def _check_complete(runs: Sequence[Run]) -> list[str]:
    return [
        f"{run.path}: shard {_shard(run)} is {run.manifest.get('status')!r}, not 'complete'"
        for run in runs
        if run.manifest.get("status") != "complete"
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


def _provenance(run: Run) -> dict[str, Any]:
    """Where one shard came from, kept in the merged manifest (each shard ran on its own machine)."""
    return {
        "run_id": run.manifest.get("run_id", run.path.name),
        "path": str(run.path),
        "shard": str(_shard(run)),
        "environment": run.manifest.get("environment"),
    }


def _merged_manifest(runs: Sequence[Run], run_id: str, rows: pd.DataFrame, forced: list[str]) -> dict[str, Any]:
    """The first shard's manifest, re-labelled: it describes the union of the shards."""
    manifest = {key: value for key, value in runs[0].manifest.items() if key != "shard"}
    started = [str(run.manifest.get("started_at")) for run in runs if run.manifest.get("started_at")]
    finished = [str(run.manifest.get("finished_at")) for run in runs if run.manifest.get("finished_at")]
    manifest.update(
        run_id=run_id,
        cases=int(rows["case_id"].nunique()),
        started_at=min(started, default=None),
        finished_at=max(finished, default=None),
        status="complete" if all(run.manifest.get("status") == "complete" for run in runs) else "incomplete",
        merged_from=[_provenance(run) for run in runs],
        forced=forced,
    )
    return manifest


def _write_merged(out_dir: Path, rows: pd.DataFrame, manifest: dict[str, Any]) -> None:
    """results.csv (no raw samples), results.parquet (with them) and manifest.json."""
    rows.drop(columns=[SAMPLES_COLUMN], errors="ignore").to_csv(out_dir / CSV_NAME, index=False)
    rows.to_parquet(out_dir / PARQUET_NAME, index=False)
    (out_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")


def merge_runs(run_dirs: Sequence[Path], out_dir: Path, force: bool = False) -> MergeResult:
    """Combine the shard runs ``run_dirs`` into one run at ``out_dir``.

    Refused with one line: a shard missing or given twice, a (case, implementation) row in two
    shards, and — unless ``force`` — shards whose config, mhabench version or device differ, or
    that did not complete. Rows keep shard order; their ``run_id`` becomes the merged run's.
    """
    if not run_dirs:
        raise InputError("merge: name the shard run folders to merge")
    runs = sorted((load_run(Path(path)) for path in run_dirs), key=lambda run: _shard(run).index)
    _check_shard_set(runs)
    forced = _disagreements(runs) + _check_complete(runs)
    if forced and not force:
        raise InputError(f"merge: {forced[0]}; pass --force to merge anyway")
    rows = pd.concat([run.rows for run in runs], ignore_index=True)
    _check_no_duplicates(rows)
    _prepare_out_dir(out_dir)
    rows["run_id"] = out_dir.name
    manifest = _merged_manifest(runs, out_dir.name, rows, forced)
    _write_merged(out_dir, rows, manifest)
    return MergeResult(out_dir, rows, forced)
