"""What one Slurm job or Ray task runs: its cases, through the per-case code a local run uses.

The cases run on the device the engine gave the worker, through :func:`mhabench.run.runner.case_rows` (in
process or, with ``isolation: process``, one child per case), so a row measured on a worker is the row a local
run would write.

A worker applies the run's process settings and plugins, places its device's roofline, and measures its cases in
turn. A case that raises becomes error rows for the implementations it left without one; the next case still runs.
With a ``stream`` file each row is appended to it as it exists, so the driver reads rows while the job runs and a
job killed half-way keeps the cases it finished.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from mhabench.errors import shorten
from mhabench.measure.allocator import apply_process_settings
from mhabench.measure.device_identity import device_id
from mhabench.measure.peaks import DevicePeaks, device_name
from mhabench.results.schema import CaseIdentity, Outcome, ResultRow, RowStatus
from mhabench.run import runner
from mhabench.run.case import CudaContextLostError
from mhabench.run.ncu_profile import CounterSettings
from mhabench.scenario import plugins
from mhabench.scenario.cases import Case
from mhabench.scenario.config import RunConfig
from mhabench.scenario.device import canonical_device, resolve_device
from mhabench.version import __version__

ERROR_LIMIT = 300
"""Longest error text kept in a row: one readable line."""


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """Where a group ran: what the manifest's ``workers`` lists per job."""

    host: str
    pid: int
    device: str
    device_id: str
    device_name: str
    torch: str
    mhabench_version: str

    @classmethod
    def here(cls, device: torch.device) -> WorkerInfo:
        name = canonical_device(device)
        return cls(
            socket.gethostname(),
            os.getpid(),
            name,
            device_id(name),
            device_name(device),
            torch.__version__,
            __version__,
        )


@dataclasses.dataclass(frozen=True)
class CaseGroup:
    """Cases for one job or task, in picklable form: the pending entries of :func:`mhabench.run.runner.pending`."""

    index: int
    entries: tuple[runner.Pending, ...]
    run_dir: str
    config: RunConfig
    """Its ``device`` is ``cpu`` or ``cuda``: each worker measures on the device it was given."""
    plugin_files: tuple[str, ...] = ()
    stream: str | None = None
    """A file each row is appended to as it exists (Slurm: the driver reads it while the job runs)."""

    @property
    def run_id(self) -> str:
        return Path(self.run_dir).name

    def labels(self) -> list[str]:
        """``case_id`` of each entry (with its repeat above 0): what progress and job names show."""
        return [case.case_id + (f" (repeat {repeat})" if repeat else "") for repeat, case, _ in self.entries]


@dataclasses.dataclass(frozen=True)
class GroupReport:
    """A finished group: where it ran, the roofs it placed its rows against, and its rows."""

    index: int
    worker: WorkerInfo
    roofline: dict[str, dict[str, Any]]
    rows: tuple[ResultRow, ...]


def measure_group(group: CaseGroup) -> GroupReport:
    """Run ``group`` here; never raises for a case (its failure is its rows), only for a worker that cannot start."""
    config = group.config
    apply_process_settings(config.allocator, config.threads)
    plugins.load_plugin_files(group.plugin_files)
    device = resolve_device(config.device)
    if device.type == "cuda":
        device = torch.device(canonical_device(device))  # the GPU the engine made visible, as cuda:N
        torch.cuda.set_device(device)
    worker = WorkerInfo.here(device)
    dtypes = sorted({case.dtype for _, case, _ in group.entries})
    peaks = runner.roofline_peaks(device, dtypes)
    roofline = {dtype: dataclasses.asdict(p) for dtype, p in peaks.items()}
    emit = _emitter(group.stream)
    emit(("worker", worker, roofline))
    rows: list[ResultRow] = []
    counters = CounterSettings.of(config, Path(group.run_dir))
    for repeat, case, names in group.entries:
        for row in _case_rows(group, device, peaks[case.dtype], repeat, case, names, counters):
            rows.append(row)
            emit(("row", row))
    return GroupReport(group.index, worker, roofline, tuple(rows))


def _case_rows(
    group: CaseGroup,
    device: torch.device,
    peaks: DevicePeaks,
    repeat: int,
    case: Case,
    names: list[str],
    counters: CounterSettings,
) -> Iterator[ResultRow]:
    """One case's rows, as a local run makes them: a lost CUDA context moves the rest into child processes."""
    config, done = group.config, set[str]()
    isolate = config.isolation == "process"
    try:
        for row in runner.case_rows(case, names, device, group.run_id, peaks, config, repeat, isolate, counters):
            done.add(row.case.impl)
            yield row
    except CudaContextLostError as lost:
        if lost.culprit is not None:
            done.add(lost.culprit.case.impl)
            yield lost.culprit
        rest = [name for name in names if name not in done]
        yield from runner.case_rows(case, rest, device, group.run_id, peaks, config, repeat, True, counters)
    except Exception as exc:  # the worker goes on with its next case; this one's missing rows say why
        outcome = Outcome(RowStatus.ERROR, one_line(exc))
        yield from missing_rows(group.run_id, case, [n for n in names if n not in done], repeat, config.device, outcome)


def missing_rows(
    run_id: str, case: Case, names: list[str], repeat: int, device: str, outcome: Outcome
) -> Iterator[ResultRow]:
    """``outcome`` for each implementation of ``case`` in ``names``: what a worker lost or could not measure."""
    for name in names:
        yield ResultRow(CaseIdentity.of(case, impl=name, run_id=run_id, device=device, repeat=repeat), outcome)


def one_line(exc: BaseException) -> str:
    """``Type: first line``, cut to :data:`ERROR_LIMIT`: a failure as one row's ``error``."""
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return shorten(f"{type(exc).__name__}: {first_line}".rstrip(": "), ERROR_LIMIT)


def _emitter(stream: str | None) -> Callable[[tuple[Any, ...]], None]:
    """Append each record to ``stream`` (opened and closed per record: readers on another host see whole records)."""
    if stream is None:
        return lambda record: None

    def emit(record: tuple[Any, ...]) -> None:
        with open(stream, "ab") as handle:
            handle.write(pickle.dumps(record))

    return emit


def read_stream(path: Path, skip: int) -> list[tuple[Any, ...]]:
    """The whole records of ``path`` after the first ``skip`` (a record still being written is left for later)."""
    if not path.is_file():
        return []
    records = []
    with open(path, "rb") as handle:
        while True:
            try:
                records.append(pickle.load(handle))
            except (EOFError, pickle.UnpicklingError, ValueError, AttributeError):
                break
    return records[skip:]
