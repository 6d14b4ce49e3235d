"""What ``mhabench run`` does with its parsed options: the launch path (this process or this rank of torchrun),
a replicated run and its children, a shard's selection, ``--resume``, and what is printed and kept after a run
(the summary, the short answer, the history append). The command itself stays a thin option parser in
:mod:`mhabench.cli`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.text import Text

from mhabench.cli_replicate import run_replicate
from mhabench.cli_shell import console, err_console
from mhabench.errors import InputError
from mhabench.results.manifest import Shard
from mhabench.run import replicates as replicated_run
from mhabench.run import runner
from mhabench.run.launch import launch_env
from mhabench.run.request import RunRequest, Selector
from mhabench.scenario import config as config_mod
from mhabench.scenario import plugins
from mhabench.scenario.device import resolve_device
from mhabench.views import pooled, summary
from mhabench.views.progress import RichProgress
from mhabench.views.run_time import run_time


def launch(
    config: config_mod.RunConfig, out_root: Path, progress: RichProgress, request: RunRequest
) -> runner.RunResult | None:
    """Run in this process, or as this rank of a ``torchrun`` launch (None on every rank but 0).

    The one place that looks at how mhabench was started. Under torchrun ``--resume`` is refused by
    the launch's own checks, so ``resume_differences`` only concerns a run in this process.
    """
    launch = launch_env()
    if launch is None:
        return runner.run(config, out_root, progress, request)
    from mhabench.distributed.run import run_distributed

    return run_distributed(config, out_root, progress, launch, request)


def run_replicate_or_replicated(
    config: config_mod.RunConfig, out: Path, replicate: str | None, repeat: int, shard: Shard | None, baseline: str
) -> runner.RunResult | None:
    """``--replicate I/N`` (a child the parent started: measure, print nothing, None) or ``replicates: N`` (the
    parent: the merged run, printed)."""
    replicated_run.check_replicable(config.replicates, repeat, shard, launch_env())
    if replicate is not None:
        run_replicate(config, out, replicated_run.parse_replicate(replicate))
        return None
    files = plugins.loaded_plugin_files()
    result = replicated_run.run_replicated(config, out, sys.argv, files, lambda line: console.print(escape(line)))
    print_run(result, baseline)
    return result


def shard_selection(config: config_mod.RunConfig, shard: Shard | None) -> tuple[Selector | None, dict[str, Any] | None]:
    """``--shard I/N``: the selector of this shard's (case, implementation) pairs and its manifest entry."""
    if shard is None:
        return None, None
    from mhabench.run.shard import shard_selector

    device = resolve_device(config.device)
    select = shard_selector(config, device, runner.implementations_of(config), shard)
    return select, {"shard": {"index": shard.index, "count": shard.count}}


def resume(ref: str, results_root: Path, force: bool, baseline: str) -> None:
    """``--resume``: measure the (case, implementation, repeat) triples the run folder lacks."""
    from mhabench.run.resume import NothingToResumeError, prepare_resume

    try:
        plan = prepare_resume(ref, results_root, force)
    except NothingToResumeError as exc:  # a finished run: success, so a retry loop may always --resume
        err_console.print(escape(str(exc)), highlight=False, soft_wrap=True)
        return
    select, _ = shard_selection(plan.config, plan.shard)
    with RichProgress(console) as progress:
        request = RunRequest(
            argv=tuple(sys.argv), select=select, resume_dir=plan.run_dir, resume_differences=plan.differences
        )
        result = launch(plan.config, plan.run_dir.parent, progress, request)
    print_run(result, baseline)


def refuse_with_resume(**given: Any) -> None:
    """A resumed run keeps the settings it was started with: other run options are refused, not ignored."""
    named = [name for name, value in given.items() if value]
    if named:
        raise InputError(f"--resume: finishes a run with the settings it started with; drop {', '.join(named)}")


def print_run(result: runner.RunResult | replicated_run.ReplicatedResult | None, baseline: str) -> None:
    """The run summary (compact above a few dozen rows); nothing on the non-zero ranks of torchrun."""
    if result is None:
        return
    # a replicated run's table is pooled across its processes; one process's prints as it always did
    tabulate = pooled.run_summary if isinstance(result, replicated_run.ReplicatedResult) else summary.run_summary
    for renderable in tabulate(result.frame, baseline, result.run_dir, console.width):
        console.print(renderable)
    for line in short_answer(result):
        console.print(Text(line))
    console.print(f"results: {result.run_dir}")
    for warning in result.warnings:
        err_console.print(escape(warning), style="yellow", highlight=False, soft_wrap=True)
    console.print(run_time(result.manifest), highlight=False, soft_wrap=True)


def append_history(
    result: runner.RunResult | replicated_run.ReplicatedResult | None, directory: Path | str | None, baseline: str
) -> None:
    """``--history DIR`` (or the config's ``history:``): the finished run's rows into the store."""
    if result is None or directory is None:
        return
    from mhabench.history.ingest import add_held_run
    from mhabench.results.store import held_run

    run = held_run(result.run_dir, result.manifest, result.rows)
    _, added = add_held_run(Path(directory), run, baseline, strict_baseline=False)
    console.print(f"history: {added} rows added to {directory}", highlight=False, soft_wrap=True)


def short_answer(result: runner.RunResult | replicated_run.ReplicatedResult) -> list[str]:
    """The few lines of ``mhabench advise`` under the run's table: the pick per case group and one why, from the
    rows and the final manifest the command holds (the folder is never read back)."""
    from mhabench.analysis.advice.advise import advise as advise_runs
    from mhabench.results.store import held_run
    from mhabench.views.advice import short_answer

    return short_answer(advise_runs([held_run(result.run_dir, result.manifest, result.rows)]), result.run_dir)
