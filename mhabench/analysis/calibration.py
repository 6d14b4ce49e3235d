"""``mhabench calibrate``: how far apart independent processes put the same ratio on this machine.

One process's interval says nothing of the next process (``mhabench.analysis.estimate``). A run of
one process can still be read honestly if the machine's between-process spread is known: a lead
smaller than it may not replicate (advise), and a change between two runs smaller than it is neither
faster nor slower (compare). The calibration measures it once per machine fingerprint: a small fixed
sweep (the default config's layouts at two short lengths, where the audit saw the most movement) run
as ``processes`` replicates; per (case, implementation) the replicates' ratios to ``naive`` and their
range ``max / min − 1``; the machine's spread is the median of those ranges (a typical pair of
processes, not the one worst ratio; every range is kept in the file). It is stored per fingerprint
(``mhabench.results.calibration``) and its run folder is an ordinary run, so it can be replayed;
``calibrate --from RUN`` reads the spread from any replicated run already on disk instead.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mhabench.analysis.estimate import between_process_range
from mhabench.analysis.speedup import DEFAULT_BASELINE, speedup_rows
from mhabench.errors import InputError
from mhabench.measure.environment import environment
from mhabench.results.calibration import Calibration, calibration_path, load_calibration, save_calibration
from mhabench.results.columns import CASE_ID, IMPL, REPEAT, STATUS
from mhabench.results.fingerprint import Fingerprint
from mhabench.results.schema import RowStatus
from mhabench.results.store import Run
from mhabench.run.replicates import ReplicateProgress, run_replicated
from mhabench.scenario.config import RunConfig
from mhabench.scenario.device import resolve_device
from mhabench.scenario.loading import parse_config

DEFAULT_PROCESSES = 5
"""Processes a calibration runs: five give a range that a sixth process rarely leaves, in about a minute
on a 2-vCPU VM (docs/findings/replication.md)."""
CALIBRATION_CONFIG: dict[str, Any] = {
    "name": "calibration",
    "implementations": ["naive", "per_head", "fused"],
    "timing": {"min_run_time_s": 0.2, "max_run_time_s": 1.0},
    "scenarios": [{"name": "calibration", "batch": 1, "seq_len": [128, 512], "d_model": 512, "heads": 8}],
}


def calibration_config(device: str | None = None, processes: int = DEFAULT_PROCESSES) -> RunConfig:
    """The calibration sweep as a config: on ``device`` (default auto), as ``processes`` replicates."""
    data = {**CALIBRATION_CONFIG, "device": device or "auto", "replicates": processes}
    return parse_config(data, "calibration")


def calibrate(
    out_root: Path,
    argv: list[str],
    device: str | None = None,
    processes: int = DEFAULT_PROCESSES,
    report: Callable[[ReplicateProgress], None] = lambda progress: None,
) -> tuple[Calibration, Path]:
    """Run the calibration sweep, measure the spread, store it for this machine; the calibration and its file."""
    result = run_replicated(calibration_config(device, processes), out_root, argv, report=report)
    calibration = calibration_of(result.run)  # the merged run as written, not read back
    return calibration, save_calibration(calibration)


def calibrate_from(run: Run) -> tuple[Calibration, Path]:
    """``calibrate --from RUN``: the spread of a replicated run already on disk, stored for its machine."""
    if not run.manifest.replicated:
        raise InputError(f"--from: {run.run_id} is not a replicated run (run it with --replicates 3 or more)")
    calibration = calibration_of(run)
    return calibration, save_calibration(calibration)


def calibrate_across(runs: Sequence[Run]) -> tuple[Calibration, Path]:
    """``calibrate --from A --from B …``: one-process runs of one config on one machine, run *i* read as process *i*
    (over the (case, implementation) pairs every run measured), stored for that machine; one run: `calibrate_from`.

    Separate runs of the default sweep are separate processes, so the recorded runs of a machine that is not at
    hand (the GPU's, docs/findings/replication.md) still say how far its processes put the same ratio apart."""
    if len(runs) == 1:
        return calibrate_from(runs[0])
    fingerprints = {Fingerprint.of(run.manifest.environment).key for run in runs}
    if len(fingerprints) > 1:
        raise InputError(f"--from: the runs were measured on {len(fingerprints)} different machines (fingerprints)")
    for run in runs:
        if run.manifest.replicated or len({row.case.repeat for row in run.rows}) > 1:
            raise InputError(f"--from: {run.run_id} holds several processes or repeats; pass it alone")
    pairs = [{(row.case.case_id, row.case.impl) for row in run.rows} for run in runs]
    shared = set.intersection(*pairs)
    if not shared:
        raise InputError("--from: the runs share no (case, implementation) pair")
    rows = [
        dataclasses.replace(row, case=dataclasses.replace(row.case, repeat=index))
        for index, run in enumerate(runs)
        for row in run.rows
        if (row.case.case_id, row.case.impl) in shared
    ]
    merged = calibration_of(Run(runs[0].path, runs[0].manifest, rows))
    times = [run.manifest.finished_at or run.manifest.started_at for run in runs]
    calibration = dataclasses.replace(
        merged,
        run_id=" ".join(run.run_id for run in runs),
        run_path=" ".join(str(run.path) for run in runs),
        measured_at=max((time for time in times if time), default=merged.measured_at),
    )
    return calibration, save_calibration(calibration)


def this_machine(device: str) -> tuple[Calibration, Path]:
    """``calibrate --show``: the calibration stored for this machine's fingerprint on ``device``, and its file."""
    fingerprint = Fingerprint.of(environment(resolve_device(device)))
    found = load_calibration(fingerprint)
    if found is None:
        raise InputError(f"no calibration for this machine ({fingerprint.key}); run mhabench calibrate")
    return found, calibration_path(fingerprint)


def calibration_of(run: Run, baseline: str = DEFAULT_BASELINE) -> Calibration:
    """The between-process spread of a replicated run: per (case, implementation) the range of its
    replicates' speedups over ``baseline``, and their median."""
    speedups = speedup_rows(run.frame, baseline)
    ok = speedups[(speedups[STATUS] == RowStatus.OK) & (speedups[IMPL] != baseline)]
    ratios = []
    for (case_id, impl), group in ok.groupby([CASE_ID, IMPL], sort=False):
        by_replicate = [float(value) for value in group.sort_values(REPEAT)["speedup"]]
        spread = between_process_range(by_replicate)
        ratios.append({"case_id": case_id, "impl": impl, "by_process": by_replicate, "range": spread})
    ranges = [entry["range"] for entry in ratios if np.isfinite(entry["range"])]
    fingerprint = Fingerprint.of(run.manifest.environment)
    return Calibration(
        fingerprint_key=fingerprint.key,
        machine=fingerprint.describe(),
        between_process_spread=float(np.median(ranges)) if ranges else float("nan"),
        processes=len({row.case.repeat for row in run.rows}),
        run_id=run.run_id,
        run_path=str(run.path),
        measured_at=run.manifest.finished_at or dt.datetime.now(dt.timezone.utc).isoformat(),
        ratios=ratios,
    )
