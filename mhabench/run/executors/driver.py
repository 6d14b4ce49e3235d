"""A cluster run's driver: hands the cases to an engine and assembles one run folder as they finish.

The driver measures nothing. It expands the cases for the workers' device, opens the run folder (a new one, or a
killed run's with ``--resume``) through the same writer and lifecycle as a local run, gives the engine one group
per job or task, and appends each row as it arrives. The manifest's ``workers`` lists each group's host and device
(GPU UUID), and its roofline is the first worker's. A group whose job or task ended without its rows (a worker
killed, a node lost once the engine's retries are spent, a time limit) leaves one row per missing implementation
with the engine's reason, as a child process that dies does in a local run. Placement, retries and logs are the
engine's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch

from mhabench.errors import InputError
from mhabench.measure.environment import environment
from mhabench.results.lifecycle import LiveRun, run_folder
from mhabench.results.schema import Outcome, ResultRow
from mhabench.results.store import RunWriter
from mhabench.run import runner
from mhabench.run.executors.worker import CaseGroup, GroupReport, WorkerInfo, missing_rows
from mhabench.run.launch import check_launch
from mhabench.run.replicates import case_order
from mhabench.run.request import RunRequest
from mhabench.scenario import plugins
from mhabench.scenario.cases import count_cases, covered_windows, expand_cases
from mhabench.scenario.config import RunConfig
from mhabench.scenario.limits import check_row_count


@dataclasses.dataclass(frozen=True)
class Rows:
    """Rows of group ``index`` that a worker has finished (a whole report, or what a job streamed so far)."""

    index: int
    worker: WorkerInfo | None
    roofline: dict[str, Any]
    rows: tuple[ResultRow, ...]
    job: str = ""


@dataclasses.dataclass(frozen=True)
class Ended:
    """Group ``index`` is over: ``failure`` None when its worker returned, else the outcome its missing rows get."""

    index: int
    failure: Outcome | None = None


Event = Rows | Ended


class Engine(Protocol):
    """What a cluster engine does for the driver: connect, say what its workers have, run the groups."""

    kind: str

    def connect(self) -> None: ...

    def workers_have_gpus(self) -> bool: ...

    def start(self, groups: Sequence[CaseGroup], run_dir: Path) -> None: ...

    def events(self) -> Iterator[Event]: ...

    def close(self) -> None: ...


def report_rows(report: GroupReport, job: str = "") -> Rows:
    return Rows(report.index, report.worker, report.roofline, report.rows, job)


def worker_device(config: RunConfig, engine: Engine) -> str:
    """``cpu`` or ``cuda``: the device every worker measures on (each its own GPU); ``auto`` asks the engine."""
    requested = config.executor.kind
    if config.device.startswith("cuda:"):
        raise InputError(
            f"device: {config.device!r} names one GPU of one machine; with executor {requested} use cuda "
            "(each worker measures on the GPU its engine gives it)"
        )
    if config.device != "auto":
        return config.device
    return "cuda" if engine.workers_have_gpus() else "cpu"


def check_dtypes(config: RunConfig, device: str) -> None:
    """``dtype: auto`` on CUDA depends on the GPU's generation, which a driver without that GPU cannot read."""
    if device == "cuda" and "auto" in config.dtype and not torch.cuda.is_available():
        raise InputError(
            f"dtype: 'auto' depends on the workers' GPU, which this driver cannot see; with executor "
            f"{config.executor.kind} name the dtype (bfloat16 on Ampere and later, float16 before)"
        )


def run_on_engine(
    config: RunConfig, out_root: Path, progress: runner.Progress | None, request: RunRequest, engine: Engine
) -> runner.RunResult:
    """Run ``config``'s pending cases through ``engine`` into one run folder; the rows and final manifest."""
    engine.connect()
    config = config.model_copy(update={"device": worker_device(config, engine)})  # recorded so --resume reads it
    check_dtypes(config, config.device)
    device = torch.device(config.device)
    specs = runner.implementations_of(config)
    check_row_count(count_cases(config, device) * request.repeats, len(specs), config.max_rows)
    cases = case_order(expand_cases(config, device), request.case_order_seed)
    check_launch(sorted({case.tensor_parallel for case in cases}), None, request.config_path)
    fields = {**environment(torch.device("cpu")), "device": config.device, "device_kind": device.type}
    fields.update(device_name="", executor=engine.kind)  # the driver's machine; the workers' are in `workers`
    writer, manifest = runner.open_run(config, out_root, request, fields, len(cases))
    todo = runner.pending(cases, specs, manifest.repeats, request.select, runner.done_keys(writer))
    groups = make_groups(todo, config, writer.run_dir)
    if progress:
        progress.start(sum(len(names) for _, _, names in todo))
    with run_folder(writer.run_dir, manifest, writer) as live:
        try:
            engine.start(groups, writer.run_dir)
            Assembler(writer, live, progress, {g.index: g for g in groups}).consume(engine.events())
        finally:
            engine.close()
    return runner.RunResult(writer.run_dir, list(writer.rows), manifest, tuple(covered_windows(config)))


def make_groups(todo: list[runner.Pending], config: RunConfig, run_dir: Path) -> list[CaseGroup]:
    """One group per job: ``cases_per_job`` cases for Slurm, one case per Ray task."""
    size = config.executor.slurm.cases_per_job if config.executor.kind == "slurm" else 1
    files = plugins.loaded_plugin_files()
    return [
        CaseGroup(index, tuple(todo[start : start + size]), str(run_dir), config, files)
        for index, start in enumerate(range(0, len(todo), size))
    ]


class Assembler:
    """Appends arriving rows to the run folder once each, records the workers, fills in what a lost group left."""

    def __init__(
        self, writer: RunWriter, live: LiveRun, progress: runner.Progress | None, groups: dict[int, CaseGroup]
    ) -> None:
        self.writer, self.live, self.progress, self.groups = writer, live, progress, groups
        self.done = runner.done_keys(writer)
        self.workers: list[dict[str, Any]] = list(getattr(live.manifest, "workers", None) or [])

    def consume(self, events: Iterator[Event]) -> None:
        for event in events:
            if isinstance(event, Rows):
                self._worker(event)
                for row in event.rows:
                    self._append(row)
            elif event.failure is not None:
                self._fill(self.groups[event.index], event.failure)

    def _append(self, row: ResultRow) -> None:
        key = (row.case.case_id, row.case.impl, row.case.repeat)
        if key in self.done:  # a streamed row that the job's result repeats, or a retried task's
            return
        self.done.add(key)
        self.writer.append(row)
        if self.progress:
            self.progress.advance(f"{row.case.case_id} {row.case.impl}")

    def _worker(self, event: Rows) -> None:
        if event.worker is None:
            return
        entry = {"group": event.index, "job": event.job, **dataclasses.asdict(event.worker)}
        entry["cases"] = self.groups[event.index].labels()
        if entry in self.workers:
            return
        self.workers.append(entry)
        fields: dict[str, Any] = {"workers": self.workers}
        if not self.live.manifest.roofline:
            fields["roofline"] = event.roofline
        names = sorted({w["device_name"] for w in self.workers})
        fields["environment"] = {**self.live.manifest.environment, "device_name": ", ".join(names)}
        self.live.record(**fields)

    def _fill(self, group: CaseGroup, failure: Outcome) -> None:
        for repeat, case, names in group.entries:
            left = [name for name in names if (case.case_id, name, repeat) not in self.done]
            for row in missing_rows(group.run_id, case, left, repeat, group.config.device, failure):
                self._append(row)
