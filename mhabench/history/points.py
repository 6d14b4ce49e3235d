"""A run folder as history records: one for the run (fingerprint, baseline, time) and one per result row
(the code version it measured and every metric the history can show, each with its interval).

The default metric is the ratio to the run's baseline implementation, paired over the rounds both were
timed in (:func:`mhabench.analysis.speedup.speedup_rows`): a slow round slows both sides, so the ratio
keeps still while the machine drifts, which raw latency across days does not. It is stored as
``impl / baseline`` latency (above 1: slower than the baseline), the direction ``compare`` and the gate read.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from mhabench.analysis.case_label import case_label
from mhabench.analysis.estimate import median_interval, samples_of
from mhabench.analysis.speedup import DEFAULT_BASELINE, speedup_rows
from mhabench.errors import InputError
from mhabench.history.provenance import UNKNOWN_COMMIT
from mhabench.results.cells import number_of
from mhabench.results.columns import (
    ACHIEVED_USEFUL_TFLOPS,
    CASE_ID,
    IMPL,
    LATENCY_MS,
    MEASURED_BYTES,
    REPEAT,
    STATUS,
    USEFUL_FLOPS,
)
from mhabench.results.fingerprint import Fingerprint
from mhabench.results.manifest import Manifest
from mhabench.results.schema import RowStatus
from mhabench.results.store import Run

ENERGY_PER_CALL_J = "energy_per_call_j"


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """What the history keeps of a run as a whole."""

    run_id: str
    started_at: str
    status: str
    baseline: str
    fingerprint: Fingerprint
    environment_json: str


@dataclasses.dataclass(frozen=True)
class RowRecord:
    """One result row as the history keeps it: identity, code version and metrics (NaN where not measured)."""

    run_id: str
    case_id: str
    case: str
    impl: str
    repeat: int
    status: str
    commit: str
    commit_time: int | None
    dirty: bool | None
    repo: str | None
    ratio: float
    ratio_low: float
    ratio_high: float
    latency_ms: float
    latency_low_ms: float
    latency_high_ms: float
    useful_tflops: float
    useful_tflops_low: float
    useful_tflops_high: float
    measured_bytes: float
    energy_per_call_j: float


def run_record(run: Run, baseline: str) -> RunRecord:
    """The run as the store keeps it: its fingerprint (what series are keyed by) and its whole environment, so a
    fingerprint change can later be explained field by field."""
    manifest = run.manifest
    environment = manifest.environment
    return RunRecord(
        run_id=run.run_id,
        started_at=manifest.started_at or "",
        status=manifest.status or "",
        baseline=baseline,
        fingerprint=Fingerprint.of(environment),
        environment_json=json.dumps(environment, sort_keys=True, default=str),
    )


def run_baseline(run: Run, requested: str | None = None, strict: bool = True) -> str:
    """The baseline the ratio is taken to: the one asked for, else ``naive``, else the run's first implementation.

    ``strict``: a requested baseline the run lacks is refused (``history --import --baseline``, a user's choice);
    otherwise it falls back (``run --history``: the run's default ``--baseline`` need not be in its config).
    """
    impls = list(dict.fromkeys(str(row.case.impl) for row in run.rows if row.case.impl is not None))
    if requested is not None and impls and requested not in impls:
        if strict:
            raise InputError(f"--baseline: {requested!r} is not in run {run.run_id} (it has {', '.join(impls)})")
        requested = None
    if requested is not None:
        return requested
    return DEFAULT_BASELINE if DEFAULT_BASELINE in impls or not impls else impls[0]


def row_records(run: Run, baseline: str) -> list[RowRecord]:
    """Every row of a run with its metrics and the version of the code it measured."""
    if not run.rows:
        return []
    frame = speedup_rows(run.frame, baseline)
    code = run.manifest.code
    fallback = _project_version(run.manifest)
    records = []
    for position, row in enumerate(frame.to_dict("records")):
        samples = samples_of(run.frame.iloc[position])
        version = code.get(row[IMPL]) or fallback
        records.append(_row_record(run.run_id, row, samples, version))
    return records


def _project_version(manifest: Manifest) -> dict[str, Any]:
    """A run written before it recorded ``code``: the commit its environment recorded (time and dirtiness unknown)."""
    commit = manifest.environment.get("git_commit")
    return {"repo": None, "commit": commit, "commit_time": None, "dirty": None}


def _row_record(run_id: str, row: dict[str, Any], samples: list[float], version: dict[str, Any]) -> RowRecord:
    ok = row.get(STATUS) == RowStatus.OK
    speedup = (_number(row.get("speedup")), _number(row.get("speedup_ci_low")), _number(row.get("speedup_ci_high")))
    latency = median_interval(samples) if ok and samples else None
    lat = (latency.ratio, latency.ci_low, latency.ci_high) if latency else (math.nan,) * 3
    useful = _number(row.get(USEFUL_FLOPS))
    tflops = tuple(useful / (ms * 1e9) if ms > 0 else math.nan for ms in (lat[0], lat[2], lat[1]))
    return RowRecord(
        run_id=run_id,
        case_id=str(row[CASE_ID]),
        case=case_label(row),
        impl=str(row[IMPL]),
        repeat=int(_number(row.get(REPEAT)) if math.isfinite(_number(row.get(REPEAT))) else 0),
        status=str(row.get(STATUS) or ""),
        commit=str(version.get("commit") or UNKNOWN_COMMIT),
        commit_time=version.get("commit_time"),
        dirty=version.get("dirty"),
        repo=version.get("repo"),
        ratio=_inverse(speedup[0]),
        ratio_low=_inverse(speedup[2]),
        ratio_high=_inverse(speedup[1]),
        latency_ms=lat[0] if ok else _number(row.get(LATENCY_MS)),
        latency_low_ms=lat[1],
        latency_high_ms=lat[2],
        useful_tflops=tflops[0] if math.isfinite(tflops[0]) else _number(row.get(ACHIEVED_USEFUL_TFLOPS)),
        useful_tflops_low=tflops[1],
        useful_tflops_high=tflops[2],
        measured_bytes=_number(row.get(MEASURED_BYTES)),
        energy_per_call_j=_number(row.get(ENERGY_PER_CALL_J)),
    )


def _number(value: Any) -> float:
    """A cell as the store keeps a number: NaN where there is none (:func:`number_of` cleans it)."""
    found = number_of(value)
    return math.nan if found is None else found


def _inverse(value: float) -> float:
    return 1.0 / value if math.isfinite(value) and value > 0 else math.nan
