"""Ray: one task per case, ``num_gpus=1`` on CUDA, ``max_retries`` for a worker or node lost mid-case.

Ray gives each task a GPU of its own. The engine joins a running cluster (``--ray-address``) or starts a local one
(``ray.init(num_cpus=…)``), which it stops again at the end."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mhabench.errors import InputError
from mhabench.results.schema import Outcome, RowStatus
from mhabench.run.executors.driver import Ended, Event, report_rows
from mhabench.run.executors.worker import CaseGroup, measure_group, one_line
from mhabench.scenario.config import RayOptions


class RayEngine:
    kind = "ray"

    def __init__(self, options: RayOptions) -> None:
        import ray

        self.ray, self.options = ray, options
        self.owned = False
        self.tasks: dict[Any, int] = {}

    def connect(self) -> None:
        """Join ``address``, or start a local cluster of ``num_cpus``; a Ray already initialised here is used as is."""
        ray = self.ray
        if ray.is_initialized():
            return
        quiet: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
        try:
            if self.options.address:
                ray.init(address=self.options.address, **quiet)
            else:
                ray.init(num_cpus=self.options.num_cpus, include_dashboard=False, **quiet)
        except ConnectionError as exc:
            raise InputError(f"--ray-address: cannot join {self.options.address!r} ({one_line(exc)})") from None
        self.owned = True

    def workers_have_gpus(self) -> bool:
        return self.ray.cluster_resources().get("GPU", 0) > 0

    def start(self, groups: Sequence[CaseGroup], run_dir: Path) -> None:
        gpus = 1 if groups and groups[0].config.device == "cuda" else 0
        task = self.ray.remote(measure_group).options(
            num_cpus=1, num_gpus=gpus, max_retries=self.options.max_retries, retry_exceptions=False
        )
        self.tasks = {task.remote(group): group.index for group in groups}

    def events(self) -> Iterator[Event]:
        """Each task's rows as it finishes; a task Ray gave up on is its group's failure."""
        ray = self.ray
        while self.tasks:
            ready, _ = ray.wait(list(self.tasks), num_returns=1)
            for ref in ready:
                index = self.tasks.pop(ref)
                try:
                    report = ray.get(ref)
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
                    yield Ended(index, Outcome(RowStatus.CRASHED, f"ray: the worker died ({one_line(exc)})"))
                    continue
                except ray.exceptions.RayError as exc:
                    yield Ended(index, Outcome(RowStatus.ERROR, f"ray: {one_line(exc)}"))
                    continue
                yield report_rows(report, ref.task_id().hex())
                yield Ended(index)

    def close(self) -> None:
        """Cancel what is still queued or running (the driver stopped early); stop a cluster this run started."""
        for ref in self.tasks:
            self.ray.cancel(ref, force=True)
        self.tasks = {}
        if self.owned:
            self.ray.shutdown()
