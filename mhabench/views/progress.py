"""What ``mhabench run`` shows while it measures: a progress bar (rich), one step per (case, implementation), and
a replicated run's line per process."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from mhabench.run.replicates import ReplicateProgress


class RichProgress:
    """The runner's ``Progress``: a bar with ETA and the (case, implementation) being measured."""

    def __init__(self, console: Console) -> None:
        self._bar = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._task: Any = None

    def __enter__(self) -> RichProgress:
        self._bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.__exit__(*exc)

    def start(self, total: int) -> None:
        self._task = self._bar.add_task("measuring", total=total)

    def advance(self, label: str) -> None:
        self._bar.update(self._task, advance=1, description=label)


def replicate_line(progress: ReplicateProgress) -> str:
    """Before the first process, where the rows will be; then each process as it ends, as the repeat it becomes.
    The processes' own run folders are merged and removed: no line names one."""
    if progress.done == 0:
        return (
            f"{progress.count} processes, one after another, each a replicate of the config; "
            f"their rows go to {progress.run_dir}"
        )
    left = f"; about {progress.left_s:.0f} s left" if progress.left_s > 0 else ""
    took = f" ({progress.seconds:.1f} s{left})" if progress.seconds > 0 else ""
    return f"process {progress.done}/{progress.count} done: repeat {progress.done - 1} of {progress.run_dir.name}{took}"
