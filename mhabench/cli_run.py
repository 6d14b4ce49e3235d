"""What ``mhabench run`` does with its parsed options: the launch path (this process or this rank of torchrun),
a replicated run and its children, a shard's selection, ``--resume``, and what is printed and kept after a run
(the summary, the short answer, the history append). The command itself stays a thin option parser in
:mod:`mhabench.cli`."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.text import Text

from mhabench.cli_replicate import main as replicate_main
from mhabench.cli_replicate import run_replicate
from mhabench.cli_shell import console, err_console
from mhabench.errors import InputError
from mhabench.results.manifest import Shard
from mhabench.run import executors, runner
from mhabench.run import replicates as replicated_run
from mhabench.run.launch import launch_env
from mhabench.run.request import RunRequest, Selector
from mhabench.scenario import config as config_mod
from mhabench.scenario import overrides, plugins
from mhabench.scenario.device import resolve_device
from mhabench.views import pooled, summary
from mhabench.views.progress import RichProgress, replicate_line
from mhabench.views.run_time import estimate_line, run_time


def launch(
    config: config_mod.RunConfig, out_root: Path, progress: RichProgress, request: RunRequest
) -> runner.RunResult | None:
    """Run in this process, or as this rank of a ``torchrun`` launch (None on every rank but 0).

    The one place that looks at how mhabench was started. Under torchrun ``--resume`` is refused by
    the launch's own checks, so ``resume_differences`` only concerns a run in this process.
    """
    launch = launch_env()
    if executors.is_remote(config):
        return executors.run_with_executor(config, out_root, progress, request, under_torchrun=launch is not None)
    if launch is None:
        return runner.run(config, out_root, progress, request)
    from mhabench.distributed.run import run_distributed

    return run_distributed(config, out_root, progress, launch, request)


def run_replicate_or_replicated(
    config: config_mod.RunConfig,
    out: Path,
    replicate: str | None,
    repeat: int,
    shard: Shard | None,
    baseline: str,
    wide: bool = False,
) -> runner.RunResult | None:
    """``--replicate I/N`` (a child the parent started: measure, print nothing, None) or ``replicates: N`` (the
    parent: the merged run, printed)."""
    replicated_run.check_replicable(config.replicates, repeat, shard, launch_env())
    if executors.is_remote(config):
        raise InputError(
            f"replicates: {config.replicates} runs its processes one after another on this machine; "
            f"not with executor {config.executor.kind}"
        )
    if replicate is not None:
        run_replicate(config, out, replicated_run.parse_replicate(replicate))
        return None
    files = plugins.loaded_plugin_files()
    fork_into = None if runner.measured_in_this_process() else replicate_main  # a fork after torch ran could hang
    result = replicated_run.run_replicated(config, out, sys.argv, files, print_replicate, fork_into)
    print_run(result, baseline, wide)
    return result


def print_replicate(progress: replicated_run.ReplicateProgress) -> None:
    """A replicated run's line before its first process and as each one ends, with the time left."""
    console.print(escape(replicate_line(progress)), highlight=False)


def shard_selection(config: config_mod.RunConfig, shard: Shard | None) -> tuple[Selector | None, dict[str, Any] | None]:
    """``--shard I/N``: the selector of this shard's (case, implementation) pairs and its manifest entry."""
    if shard is None:
        return None, None
    from mhabench.run.shard import shard_selector

    device = resolve_device(config.device)
    select = shard_selector(config, device, runner.implementations_of(config), shard)
    return select, {"shard": {"index": shard.index, "count": shard.count}}


def resume(ref: str, results_root: Path, force: bool, baseline: str, ray_address: str | None = None) -> None:
    """``--resume``: measure the (case, implementation, repeat) triples the run folder lacks (a cluster run through
    its engine again; ``--ray-address``: the Ray cluster to join now)."""
    from mhabench.run.resume import NothingToResumeError, prepare_resume

    try:
        plan = prepare_resume(ref, results_root, force)
    except NothingToResumeError as exc:  # a finished run: success, so a retry loop may always --resume
        err_console.print(escape(str(exc)), highlight=False, soft_wrap=True)
        return
    if ray_address is not None:
        plan = dataclasses.replace(plan, config=overrides.with_overrides(plan.config, ray_address=ray_address))
    select, _ = shard_selection(plan.config, plan.shard)
    with RichProgress(console) as progress:
        request = RunRequest(
            argv=tuple(sys.argv), select=select, resume_dir=plan.run_dir, resume_differences=plan.differences
        )
        result = launch(plan.config, plan.run_dir.parent, progress, request)
    print_run(result, baseline)


def dry_run(config: config_mod.RunConfig, repeats: int, history: Path | str | None) -> None:
    """``--dry-run``: the planned rows with their modelled cost, and how long the run will take (per-call times
    from the ``history`` folder's earlier runs of the same cases where it has them, else the cost model)."""
    from mhabench.history.store import median_latencies_ms
    from mhabench.results.store import rows_frame
    from mhabench.views.table import to_rich

    planned = runner.plan(config, repeats)
    console.print(to_rich(summary.plan_table(rows_frame(planned))))
    known = median_latencies_ms(Path(history)) if history is not None else {}
    line = estimate_line(runner.estimate(config, planned, repeats, known))
    console.print(escape(line), highlight=False, soft_wrap=True)


def refuse_with_resume(**given: Any) -> None:
    """A resumed run keeps the settings it was started with: other run options are refused, not ignored."""
    named = [name for name, value in given.items() if value]
    if named:
        raise InputError(f"--resume: finishes a run with the settings it started with; drop {', '.join(named)}")


def print_run(
    result: runner.RunResult | replicated_run.ReplicatedResult | None, baseline: str, wide: bool = False
) -> None:
    """The run's answer: per case one row, one column per implementation, then the short answer; with ``wide`` the
    long table (every row, every column) instead of the narrow one. Its record is written to the run folder
    (answers.json). Nothing on the non-zero ranks of torchrun."""
    from mhabench.answers_on_disk import answer_at_end
    from mhabench.results.store import held_run
    from mhabench.views.advice import short_answer

    if result is None:
        return
    advice = answer_at_end(held_run(result.run_dir, result.manifest, result.rows), baseline)
    if wide:
        replicated = isinstance(result, replicated_run.ReplicatedResult)
        tabulate = pooled.wide_summary if replicated else summary.wide_summary
        printed = tabulate(advice.runs[0].record.with_picks(result.frame), baseline, console.width)
    else:
        printed = summary.run_summary(advice.runs[0].record, result.frame, result.run_dir, console.width)
    for renderable in printed:
        console.print(renderable)
    for line in short_answer(advice, result.run_dir):
        console.print(Text(line))
    console.print(f"results: {result.run_dir}")
    for warning in result.warnings:
        err_console.print(escape(warning), style="yellow", highlight=False, soft_wrap=True)
    console.print(run_time(result.manifest, result.rows), highlight=False, soft_wrap=True)


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
