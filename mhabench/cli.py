"""The command line: thin Typer commands; the work happens in the library modules."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from mhabench import cli_run
from mhabench.analysis.speedup import DEFAULT_BASELINE
from mhabench.cli_claims import claims_app
from mhabench.cli_shell import OneLineErrors, console, err_console, user_errors
from mhabench.cli_shell import fresh_console as _fresh_console
from mhabench.errors import InputError
from mhabench.history.provenance import code_versions
from mhabench.impls import get_spec
from mhabench.impls.registry import available_implementations
from mhabench.results.columns import columns_info, reference_markdown
from mhabench.run import runner
from mhabench.run.launch import launch_env
from mhabench.run.request import RunRequest
from mhabench.scenario import loading as config_loading
from mhabench.scenario import overrides, plugins
from mhabench.version import __version__
from mhabench.views.implementations import implementations_markdown
from mhabench.views.models import models_table, models_view
from mhabench.views.progress import RichProgress
from mhabench.views.table import to_markdown, to_rich

app = typer.Typer(
    cls=OneLineErrors,
    add_completion=False,
    no_args_is_help=True,
    help="Ablation and benchmarking lab for multi-head attention.",
    pretty_exceptions_enable=False,
)
app.add_typer(claims_app, name="claims")


def _version(value: bool) -> None:
    if value:
        console.print(f"mhabench {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Ablation and benchmarking lab for multi-head attention."""


@app.command()
def run(
    configs: Annotated[
        list[Path] | None, typer.Argument(help="Scenario YAML files (default: the embedded default).")
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder that receives <run_id>/.")] = Path("results"),
    device: Annotated[str | None, typer.Option("--device", help="auto | cpu | cuda | cuda:N")] = None,
    impl: Annotated[list[str] | None, typer.Option("--impl", help="Implementation to run (repeatable).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List cases and predicted cost only.")] = False,
    plugin: Annotated[
        list[Path] | None,
        typer.Option("--plugin", help="Python file that registers implementations; they join the run (repeatable)."),
    ] = None,
    baseline: Annotated[str, typer.Option("--baseline", help="Summary speedups over this impl.")] = DEFAULT_BASELINE,
    max_rows: Annotated[int | None, typer.Option("--max-rows", help="Allow a sweep above the row limit.")] = None,
    repeat: Annotated[int, typer.Option("--repeat", min=1, help="Run the sweep N times in one process.")] = 1,
    isolation: Annotated[
        str | None, typer.Option("--isolation", help="inprocess | process (one child process per case).")
    ] = None,
    shard: Annotated[str | None, typer.Option("--shard", help="I/N: run the I-th of N cost-balanced shards.")] = None,
    resume: Annotated[
        str | None, typer.Option("--resume", help="Finish a killed run (folder, run id or latest).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="--resume even if the rows would not be comparable.")] = False,
    no_memory_guard: Annotated[
        bool, typer.Option("--no-memory-guard", help="Try cases predicted not to fit (they may end as oom).")
    ] = False,
    allocator: Annotated[str | None, typer.Option("--allocator", help="CPU allocator policy: steady | system.")] = None,
    threads: Annotated[
        int | None, typer.Option("--threads", help="torch threads (default: the config's, else all).")
    ] = None,
    counters: Annotated[
        str | None,
        typer.Option("--counters", help="off | hardware (CUDA: Nsight Compute counters of one call per ok row)."),
    ] = None,
    energy_windows: Annotated[
        int | None, typer.Option("--energy-windows", help="CUDA: NVML energy windows per ok row (0: off).")
    ] = None,
    history_dir: Annotated[
        Path | None, typer.Option("--history", help="Append the run's rows to this history folder (docs/history.md).")
    ] = None,
    replicates: Annotated[
        int | None,
        typer.Option("--replicates", help="Run the config as N independent processes (default: the config's)."),
    ] = None,
    replicate: Annotated[str | None, typer.Option("--replicate", hidden=True, help="I/N: be replicate I.")] = None,
    executor: Annotated[
        str | None, typer.Option("--executor", help="local | slurm | ray: where the cases run (docs/distributed.md).")
    ] = None,
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="--executor ray: join this running Ray cluster.")
    ] = None,
    wide: Annotated[
        bool, typer.Option("--wide", help="Print every row and column, not one row per case (the CSV has all).")
    ] = False,
) -> None:
    """Measure every implementation on every case of the scenario files."""
    from mhabench.distributed.launch import errors_end_every_rank
    from mhabench.run.shard import parse_shard

    with user_errors(), errors_end_every_rank(launch_env()):  # under torchrun: one line, from rank 0
        added = [name for path in plugin or [] for name in plugins.load_plugin(path)]
        if baseline not in available_implementations():
            known = ", ".join(sorted(available_implementations()))
            raise InputError(f"--baseline: unknown implementation {baseline!r}; known: {known}")
        if resume is not None:
            cli_run.refuse_with_resume(
                CONFIG=configs,
                **{
                    "--device": device,
                    "--impl": impl,
                    "--dry-run": dry_run,
                    "--repeat": repeat > 1,
                    "--isolation": isolation,
                    "--shard": shard,
                    "--no-memory-guard": no_memory_guard,
                    "--allocator": allocator,
                    "--max-rows": max_rows,
                    "--threads": threads,
                    "--counters": counters,
                    "--energy-windows": energy_windows is not None,
                    "--history": history_dir,  # a resumed run: `mhabench history DIR --import RUN` once it is done
                    "--replicates": replicates is not None,
                    "--executor": executor,
                },
            )
            cli_run.resume(resume, out, force, baseline, ray_address)
            return
        parsed_shard = parse_shard(shard) if shard is not None else None
        paths = [str(path) for path in configs] if configs else [config_loading.default_config_name(device)]
        loaded = (
            [config_loading.load_config(path) for path in configs]
            if configs
            else [config_loading.load_default_config(device)]
        )
        loaded = [
            overrides.with_overrides(
                c,
                device=device,
                implementations=impl or plugins.with_plugin_implementations(c.implementations, added),
                max_rows=max_rows,
                isolation=isolation,
                memory_guard=False if no_memory_guard else None,
                allocator=allocator,
                threads=threads,
                counters=counters,
                energy_windows=energy_windows,
                replicates=replicates,
                executor=executor,
                ray_address=ray_address,
            )
            for c in loaded
        ]
        for path, config in zip(paths, loaded, strict=True):
            if dry_run:
                cli_run.dry_run(config, repeat, history_dir or config.history)
                continue
            if replicate is not None or config.replicates > 1:
                replicated = cli_run.run_replicate_or_replicated(
                    config, out, replicate, repeat, parsed_shard, baseline, wide
                )
                if replicated is not None:
                    cli_run.append_history(replicated, history_dir or config.history, baseline)
                continue
            select, extra = cli_run.shard_selection(config, parsed_shard)
            with RichProgress(console) as progress:
                request = RunRequest(
                    argv=tuple(sys.argv),
                    repeats=repeat,
                    select=select,
                    manifest_extra={**(extra or {}), "code": code_versions(runner.implementations_of(config))},
                    config_path=path,
                )
                result = cli_run.launch(config, out, progress, request)
            cli_run.print_run(result, baseline, wide)
            cli_run.append_history(result, history_dir or config.history, baseline)


@app.command("list")
def list_implementations(
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the Markdown table of the README's implementation list.")
    ] = False,
) -> None:
    """The registered implementations, one line each."""
    if markdown:
        typer.echo(implementations_markdown())
        return
    table = Table(show_header=True)
    for header in ("implementation", "default", "cost model", "what it does"):
        table.add_column(header)
    for name in available_implementations():
        spec = get_spec(name)
        table.add_row(name, "yes" if spec.core else "", spec.cost.name if spec.cost else "-", spec.description)
    console.print(table)


@app.command()
def models(
    markdown: Annotated[bool, typer.Option("--markdown", help="Print the presets as a Markdown table.")] = False,
) -> None:
    """The model presets a scenario's ``model:`` names, with the attention shape each fills in."""
    table = models_table()
    if markdown:
        typer.echo(to_markdown(table))
        return
    console.print(models_view(console.width))


@app.command()
def columns(
    markdown: Annotated[bool, typer.Option("--markdown", help="Print docs/columns.md (the column reference).")] = False,
) -> None:
    """Every result column: unit, role (key / measured / modelled / derived) and meaning."""
    if markdown:
        typer.echo(reference_markdown())
        return
    table = Table(show_header=True)
    for header in ("column", "unit", "role", "description"):
        table.add_column(header)
    for info in columns_info():
        table.add_row(info.name, info.unit, info.role, info.description)
    console.print(table)


@app.command()
def compare(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="Run folder, run id, or latest (the base).")],
    candidate_ref: Annotated[
        str | None, typer.Argument(metavar="[CANDIDATE]", help="Second run: compare CANDIDATE against RUN.")
    ] = None,
    baseline: Annotated[str, typer.Option("--baseline", help="One run: speedups over this impl.")] = DEFAULT_BASELINE,
    threshold: Annotated[str, typer.Option("--threshold", help="Two runs: smallest change that counts.")] = "5%",
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            "--fail-on-regression",
            help="Exit 1 if a row's whole CI is slower than the threshold or its counted work rose past it; "
            "3 if rows cannot be judged (docs/history.md).",
        ),
    ] = False,
    on_noise: Annotated[
        str, typer.Option("--on-noise", help="fail | pass: exit 3 or 0 when the machine moved too much to judge.")
    ] = "fail",
    force: Annotated[bool, typer.Option("--force", help="Compare runs from different device kinds.")] = False,
    process_spread: Annotated[
        str,
        typer.Option("--process-spread", help="Two runs: between-process spread, auto (mhabench calibrate) or 3%."),
    ] = "auto",
    output: Annotated[Path | None, typer.Option("--output", help="Also write .csv, .json or .md.")] = None,
    results_root: Annotated[Path, typer.Option("--results-root", help="Where run ids are looked up.")] = Path(
        "results"
    ),
) -> None:
    """One run: speedup of every impl over a baseline. Two runs: what got faster or slower, with statistics."""
    from mhabench import cli_gate

    with user_errors():
        cli_gate.compare(
            run_ref,
            candidate_ref,
            baseline,
            threshold,
            fail_on_regression,
            on_noise,
            force,
            process_spread,
            output,
            results_root,
        )


@app.command()
def ab(
    base_file: Annotated[Path, typer.Argument(metavar="BASE.py", help="The plugin file as it was (the base).")],
    candidate_file: Annotated[Path, typer.Argument(metavar="CANDIDATE.py", help="The plugin file as it is now.")],
    config: Annotated[
        Path | None, typer.Argument(metavar="[CONFIG]", help="Scenario YAML (default: the embedded default).")
    ] = None,
    replicates: Annotated[
        int | None, typer.Option("--replicates", min=1, help="Fresh processes (default: the config's, at least 3).")
    ] = None,
    threshold: Annotated[str, typer.Option("--threshold", help="Smallest change that counts.")] = "5%",
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            "--fail-on-regression", help="Exit 1 on a slower row or a rise in counted work (docs/history.md)."
        ),
    ] = False,
    device: Annotated[str | None, typer.Option("--device", help="auto | cpu | cuda | cuda:N")] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder that receives <run_id>/.")] = Path("results"),
    output: Annotated[Path | None, typer.Option("--output", help="Also write .csv, .json or .md.")] = None,
) -> None:
    """Two versions of a plugin file in the same paired rounds, in several fresh processes: the CI gate."""
    from mhabench import cli_gate

    with user_errors():
        cli_gate.ab(base_file, candidate_file, config, replicates, threshold, fail_on_regression, device, out, output)


@app.command()
def report(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="Run folder, run id, or latest.")],
    report_format: Annotated[str, typer.Option("--format", help="html | md | both (markdown = md)")] = "both",
    baseline: Annotated[str, typer.Option("--baseline", help="Speedups over this impl.")] = DEFAULT_BASELINE,
    out: Annotated[Path | None, typer.Option("--out", help="Folder for the report (default: the run folder).")] = None,
    results_root: Annotated[Path, typer.Option("--results-root", help="Where run ids are looked up.")] = Path(
        "results"
    ),
    kernels: Annotated[
        int, typer.Option("--kernels", min=0, help="List each profiled row's N longest kernels (counters: hardware).")
    ] = 0,
    history_dir: Annotated[
        Path | None, typer.Option("--history", help="Add the timeline of this run's series from this history.")
    ] = None,
    replicate_rows: Annotated[
        bool, typer.Option("--replicate-rows", help="A replicated run: each process's rows after the pooled tables.")
    ] = False,
) -> None:
    """Write report.md and a self-contained report.html (tables, plots) for a run."""
    from mhabench.probe.report import claims_blocks
    from mhabench.results import store
    from mhabench.views.report.files import parse_formats, write_report
    from mhabench.views.report.sections import build

    with user_errors():
        formats = parse_formats(report_format)
        run_data = store.load_run(run_ref, results_root)
        claims = claims_blocks(run_data.path)  # a probe run's claims lead
        blocks = build(run_data, baseline, first=claims, kernels=kernels, replicate_rows=replicate_rows)
        if history_dir is not None:
            from mhabench.history.gate import DEFAULT_THRESHOLD
            from mhabench.history.timeline import run_blocks

            blocks = [*blocks, *run_blocks(history_dir, run_data, DEFAULT_THRESHOLD)]
        for path in write_report(blocks, out or run_data.path, formats):
            _fresh_console().print(f"report: {path}", highlight=False, soft_wrap=True)


def main() -> None:
    app()


@app.command()
def probe(
    configs: Annotated[
        list[Path], typer.Argument(metavar="CONFIG", help="Probe files with claims: (configs/claims.yaml).")
    ],
    out: Annotated[Path, typer.Option("--out", help="Folder that receives <run_id>/.")] = Path("results"),
) -> None:
    """Measure the seeds' claims about attention itself (variance, saturation, rank, diagonal, JL), with verdicts."""
    from mhabench.probe.config import load_probe_config
    from mhabench.probe.run import run_config
    from mhabench.probe.table import verdict_counts, verdict_table

    with user_errors():
        for config in [load_probe_config(path) for path in configs]:
            result = run_config(config, out, argv=sys.argv)
            _fresh_console().print(to_rich(verdict_table(result.records, f"{result.run_dir.name}: claims")))
            _fresh_console().print(f"{verdict_counts(result.records)}\nresults: {result.run_dir}", highlight=False)


@app.command()
def merge(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN...", help="The shard run folders (run --shard I/N).")],
    out: Annotated[Path, typer.Option("--out", help="New (or empty) folder for the merged run.")],
    force: Annotated[
        bool, typer.Option("--force", help="Merge even if config, version or device differ, or a shard stopped early.")
    ] = False,
) -> None:
    """Combine the shard runs of one sweep into one run folder that compare and report read like any other."""
    from mhabench.results.merge import merge_runs

    with user_errors():
        merged = merge_runs(runs, out, force=force)
        for difference in merged.forced:
            err_console.print(f"[yellow]forced:[/yellow] {escape(difference)}", highlight=False, soft_wrap=True)
        status = "" if merged.status == "complete" else f" (status {merged.status}: a shard did not complete)"
        _fresh_console().print(
            f"merged {len(merged.frame)} rows from {len(runs)} shards{status}\nresults: {merged.run_dir}",
            highlight=False,
        )


@app.command()
def advise(
    run_refs: Annotated[
        list[str], typer.Argument(metavar="RUN...", help="Runs to advise on; with several, where their picks differ.")
    ],
    output_format: Annotated[str, typer.Option("--format", help="terminal | md | json")] = "terminal",
    for_device: Annotated[
        str | None, typer.Option("--for", help="The device kind you will run on (cpu | cuda), if not the run's.")
    ] = None,
    impl: Annotated[
        list[str] | None, typer.Option("--impl", help="An implementation you are asking about (repeatable).")
    ] = None,
    results_root: Annotated[Path, typer.Option("--results-root", help="Where run ids are looked up.")] = Path(
        "results"
    ),
    calibration: Annotated[
        Path | None,
        typer.Option("--calibration", help="A calibration file (mhabench calibrate's) instead of the run's own."),
    ] = None,
) -> None:
    """Which implementation to run for each case, where the answer changes, why, and what the runs cannot tell."""
    from mhabench.analysis.statement import Question
    from mhabench.answers_on_disk import advise_folders
    from mhabench.results import store
    from mhabench.views import advice as advice_view

    with user_errors():
        chosen = advice_view.parse_format(output_format)
        runs = [store.require_results(store.load_run(ref, results_root)) for ref in run_refs]
        found = advise_folders(runs, Question(for_device, tuple(impl or ())), calibration)
        if chosen == "terminal":
            out = _fresh_console()
            for renderable in advice_view.to_terminal(found):
                out.print(renderable)
        else:
            typer.echo(advice_view.to_json(found) if chosen == "json" else advice_view.to_markdown(found))


@app.command()
def explain(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="Run folder, run id, or latest.")],
    case: Annotated[list[str] | None, typer.Option("--case", help="A case id or label (repeatable).")] = None,
    impl: Annotated[list[str] | None, typer.Option("--impl", help="An implementation (repeatable).")] = None,
    output_format: Annotated[str, typer.Option("--format", help="terminal | markdown | json")] = "terminal",
    results_root: Annotated[Path, typer.Option("--results-root", help="Where run ids are looked up.")] = Path(
        "results"
    ),
) -> None:
    """Why each implementation clearly slower than a case's pick is slower: its stages against the cost model."""
    from mhabench.analysis.explain.explain import explain as explain_run
    from mhabench.results import store
    from mhabench.views import explain as explain_view

    with user_errors():
        chosen = explain_view.parse_format(output_format)
        run_data = store.require_results(store.load_run(run_ref, results_root))
        found = explain_run(run_data, tuple(case or ()), tuple(impl or ()))
        if chosen == "terminal":
            out = _fresh_console()
            for renderable in explain_view.to_terminal(found):
                out.print(renderable)
        else:
            typer.echo(explain_view.to_json(found) if chosen == "json" else explain_view.to_markdown_text(found))


@app.command()
def spread(
    run_refs: Annotated[list[str], typer.Argument(metavar="RUN...", help="Runs of one config (or one --repeat run).")],
    baseline: Annotated[str, typer.Option("--baseline", help="Speedups over this impl.")] = DEFAULT_BASELINE,
    results_root: Annotated[Path, typer.Option("--results-root", help="Where run ids are looked up.")] = Path(
        "results"
    ),
) -> None:
    """Run-to-run spread of every speedup: several runs of one config, or the repeats of one run."""
    from mhabench.analysis import spread as spread_mod
    from mhabench.results import store
    from mhabench.views.spread import spread_table

    with user_errors():
        frame = spread_mod.runs_as_repeats([store.load_run(ref, results_root) for ref in run_refs])
        _fresh_console().print(to_rich(spread_table(spread_mod.speedup_spread(frame, baseline), baseline)))


@app.command()
def calibrate(
    out: Annotated[Path, typer.Option("--out", help="Folder that receives the calibration run.")] = Path("results"),
    device: Annotated[str | None, typer.Option("--device", help="auto | cpu | cuda | cuda:N")] = None,
    processes: Annotated[
        int, typer.Option("--processes", min=2, max=100, help="Independent processes to measure.")
    ] = 5,
    show: Annotated[
        bool, typer.Option("--show", help="Print this machine's stored calibration; measure nothing.")
    ] = False,
    from_run: Annotated[
        list[str] | None,
        typer.Option("--from", help="A replicated run on disk, or several one-process runs (repeat --from)."),
    ] = None,
    devices: Annotated[
        bool,
        typer.Option(
            "--devices", help="The spread between devices: the sweep on each GPU (or --from runs per device)."
        ),
    ] = False,
) -> None:
    """Measure this machine's between-process spread (cached per machine fingerprint; advise and compare use it)."""
    from mhabench import cli_calibrate

    with user_errors():
        if devices:
            cli_calibrate.device_spread(out, from_run or [])
        elif show:
            cli_calibrate.show(device)
        else:
            cli_calibrate.calibrate(out, device, processes, from_run or [])


@app.command("check-timing")
def check_timing(
    config_path: Annotated[Path, typer.Argument(metavar="CONFIG", help="Scenario YAML (CPU).")],
) -> None:
    """Our CPU medians against torch.utils.benchmark.Timer on every case; exit 1 if any differ by more than 5 %."""
    import torch

    from mhabench.checks.timing import TOLERANCE, Outcome
    from mhabench.checks.timing import check_timing as check
    from mhabench.checks.timing_view import agreement_line, timing_table

    with user_errors():
        checks = check(config_loading.load_config(config_path), str(config_path))
        _fresh_console().print(to_rich(timing_table(checks, torch.get_num_threads(), TOLERANCE)))
        _fresh_console().print(agreement_line(checks, TOLERANCE))
        if any(found.outcome in (Outcome.FAIL, Outcome.ERROR) for found in checks):
            raise typer.Exit(1)


@app.command()
def history(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="The history folder (run --history DIR).")],
    import_runs: Annotated[
        list[str] | None, typer.Option("--import", help="Add this run folder or run id first (repeatable).")
    ] = None,
    case: Annotated[list[str] | None, typer.Option("--case", help="Only this case id or label (repeatable).")] = None,
    impl: Annotated[list[str] | None, typer.Option("--impl", help="Only this implementation (repeatable).")] = None,
    metric: Annotated[str, typer.Option("--metric", help="ratio | latency | tflops | bytes | energy")] = "ratio",
    output_format: Annotated[str, typer.Option("--format", help="terminal | md | json")] = "terminal",
    gate: Annotated[
        bool, typer.Option("--gate", help="Exit 1 if the newest point of a series is a significant regression.")
    ] = False,
    threshold: Annotated[
        str | None, typer.Option("--threshold", help="Smallest change that counts (default 5%).")
    ] = None,
    report_dir: Annotated[
        Path | None, typer.Option("--report", help="Also write report.html and report.md (timeline plot) here.")
    ] = None,
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="--import: the ratio's baseline (default: naive).")
    ] = None,
    results_root: Annotated[Path, typer.Option("--results-root", help="Where run ids are looked up.")] = Path(
        "results"
    ),
) -> None:
    """Every series (case, implementation, machine) over commits, its change points, and the CI gate."""
    from mhabench.history import command
    from mhabench.history.timeline import blocks
    from mhabench.views.report.files import write_report

    with user_errors():
        options = command.check_options(output_format, metric, threshold)
        for line in command.import_runs(directory, import_runs or [], baseline, results_root):
            err_console.print(escape(line), highlight=False, soft_wrap=True)
        view = command.read(directory, options, case or (), impl or (), gate)
        if options.output_format == "terminal":
            for table in view.tables():
                _fresh_console().print(to_rich(table))
        else:
            typer.echo(view.text(options.output_format))
        if report_dir is not None:
            for path in write_report(blocks(view.history), report_dir, ("md", "html")):
                err_console.print(f"report: {path}", highlight=False, soft_wrap=True)
        for line in view.notes():
            err_console.print(escape(line), highlight=False, soft_wrap=True)
        if view.regression:
            raise typer.Exit(1)


@app.command()
def bisect(
    good: Annotated[str, typer.Argument(metavar="GOOD", help="A commit of the plugin's repository that was fast.")],
    bad: Annotated[str, typer.Argument(metavar="BAD", help="A later commit that is slower.")],
    config: Annotated[Path, typer.Option("--config", help="The scenario to run at each commit.")],
    plugin: Annotated[Path, typer.Option("--plugin", help="The plugin file, inside its git repository.")],
    impl: Annotated[str | None, typer.Option("--impl", help="The implementation to follow.")] = None,
    threshold: Annotated[str, typer.Option("--threshold", help="Smallest change that counts.")] = "5%",
    history_dir: Annotated[
        Path | None, typer.Option("--history", help="Keep the measured points in this history folder.")
    ] = None,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Runs per measured commit, pooled into its point.")] = 3,
) -> None:
    """The first commit between GOOD and BAD whose point has stepped (runs the config in a temporary worktree)."""
    from mhabench.analysis.stats import parse_threshold
    from mhabench.history.bisect import bisect as bisect_commits

    with user_errors():
        config_loading.load_config(config)  # a bad config is refused here, not once per commit
        found = bisect_commits(good, bad, config, plugin, impl, parse_threshold(threshold), history_dir, runs)
        out = _fresh_console()
        for line in found.lines():
            out.print(escape(line), highlight=False, soft_wrap=True)
