"""Slurm through submitit: a job array, one job per ``cases_per_job`` cases; ``cluster: local`` runs them here.

Each job asks for the partition, account, GPUs, CPUs and time limit of the config. ``cluster: local`` runs the
same jobs as processes on this machine (submitit's LocalExecutor, all at once: a check of the path, not a
measurement).

submitit keeps each job's pickles and logs under ``<run folder>/slurm/<job id>/``; the run folder must be on a
file system the nodes share. Each job also appends its rows to ``slurm/rows/`` as they exist, which the driver
reads while it polls, so rows arrive case by case and a job killed half-way keeps the cases it finished.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mhabench.errors import InputError, shorten
from mhabench.results.schema import Outcome, RowStatus
from mhabench.run.executors.driver import Ended, Event, Rows, report_rows
from mhabench.run.executors.worker import ERROR_LIMIT, CaseGroup, WorkerInfo, measure_group, one_line, read_stream
from mhabench.scenario.config import SlurmOptions

EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")
"""A traceback's last line: the exception's type, then its message."""
POLL_S = 1.0
"""How often the driver reads the row files and asks submitit about its jobs (submitit rate-limits sacct itself)."""


class SlurmEngine:
    kind = "slurm"

    def __init__(self, options: SlurmOptions) -> None:
        import submitit

        self.submitit, self.options = submitit, options
        self.jobs: dict[int, Any] = {}
        self.streams: dict[int, Path] = {}
        self.read: dict[int, int] = {}
        self.workers: dict[int, tuple[WorkerInfo, dict[str, Any]]] = {}

    def connect(self) -> None:
        """Nothing to join: submitit submits through sbatch (or runs processes here) when the jobs start."""

    def workers_have_gpus(self) -> bool:
        return self.options.gpus_per_job > 0

    def start(self, groups: Sequence[CaseGroup], run_dir: Path) -> None:
        if not groups:
            return
        options, folder = self.options, run_dir / "slurm"
        executor = self.submitit.AutoExecutor(folder=folder / "%j", cluster=options.cluster)
        executor.update_parameters(
            name=f"mhabench-{run_dir.name}",
            timeout_min=options.time_limit_min,
            gpus_per_node=options.gpus_per_job,
            cpus_per_task=options.cpus_per_job,
            nodes=1,
            tasks_per_node=1,
            slurm_partition=options.partition,
            slurm_account=options.account,
            slurm_array_parallelism=options.max_parallel_jobs,
        )
        (folder / "rows").mkdir(parents=True, exist_ok=True)
        attempt = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")  # a resumed run writes new files
        streamed = [
            CaseGroup(
                g.index, g.entries, g.run_dir, g.config, g.plugin_files, str(folder / "rows" / f"{attempt}-{g.index}")
            )
            for g in groups
        ]
        try:
            jobs = executor.map_array(measure_group, streamed)
        except Exception as exc:  # sbatch missing or refusing the array: nothing was submitted
            raise InputError(f"executor slurm: cannot submit the job array ({one_line(exc)})") from None
        self.jobs = {g.index: job for g, job in zip(streamed, jobs, strict=True)}
        self.streams = {g.index: Path(g.stream or "") for g in streamed}
        self.read = dict.fromkeys(self.jobs, 0)

    def events(self) -> Iterator[Event]:
        """Rows as the jobs stream them; a job's end brings its result, or its failure for the rows it left."""
        while self.jobs:
            for index, job in list(self.jobs.items()):
                finished = job.done()  # asked before reading, so rows written before the end are read below
                yield from self._streamed(index, job)
                if finished:
                    del self.jobs[index]
                    yield self._ended(index, job)
            if self.jobs:
                time.sleep(POLL_S)

    def _streamed(self, index: int, job: Any) -> Iterator[Event]:
        records = read_stream(self.streams[index], self.read[index])
        self.read[index] += len(records)
        rows = []
        for record in records:
            if record[0] == "worker":
                self.workers[index] = (record[1], record[2])
            else:
                rows.append(record[1])
        worker, roofline = self.workers.get(index, (None, {}))
        if rows or records:
            yield Rows(index, worker, roofline, tuple(rows), str(job.job_id))

    def _ended(self, index: int, job: Any) -> Event:
        failure = job.exception()
        if failure is None:
            return report_rows(job.result(), str(job.job_id))
        if isinstance(failure, self.submitit.core.utils.FailedJobError):  # the job's Python raised: its error
            return Ended(index, Outcome(RowStatus.ERROR, f"slurm job {job.job_id}: {raised_line(str(failure))}"))
        state = _state(job)
        status = RowStatus.TIMEOUT if state == "TIMEOUT" else RowStatus.CRASHED
        line = one_line(failure).replace("\n", " ")
        return Ended(index, Outcome(status, f"slurm job {job.job_id} ended {state or 'early'}: {line}"))

    def close(self) -> None:
        """Cancel the jobs still queued or running (the driver stopped early)."""
        for job in self.jobs.values():
            try:
                job.cancel(check=False)
            except Exception:  # a job that ended meanwhile; nothing to cancel
                continue
        self.jobs = {}


def raised_line(trace: str) -> str:
    """The exception line of the traceback submitit reports for a job that raised (its first line otherwise)."""
    lines = [line.strip() for line in trace.strip().splitlines()]
    raised = [line for line in lines if EXCEPTION_LINE.match(line)]
    return shorten((raised or lines or [""])[-1 if raised else 0], ERROR_LIMIT)


def _state(job: Any) -> str:
    try:
        return str(job.state).split()[0]
    except Exception:  # the scheduler no longer knows the job
        return ""
