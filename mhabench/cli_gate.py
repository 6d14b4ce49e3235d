"""What ``mhabench compare`` and ``mhabench ab`` do with their parsed options: load the runs (or run both plugin
versions in the same rounds, in fresh processes), print the comparison, and end with the gate's exit code
(``--fail-on-regression``, :mod:`mhabench.analysis.two_run_gate`). The commands themselves stay thin option
parsers in :mod:`mhabench.cli`."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.text import Text

from mhabench import cli_run
from mhabench.analysis import compare as compare_mod
from mhabench.analysis import stats
from mhabench.analysis.ab import compare_versions
from mhabench.analysis.compare import Comparison
from mhabench.analysis.device_mix import compared_device_mix, run_device_mix
from mhabench.analysis.two_run_gate import ON_NOISE, GateResult
from mhabench.cli_shell import err_console, fresh_console
from mhabench.errors import InputError
from mhabench.results import store
from mhabench.results.completeness import require_whole
from mhabench.run import ab as ab_run
from mhabench.run import replicates as replicated_run
from mhabench.run import runner
from mhabench.run.request import RunRequest
from mhabench.scenario import loading as config_loading
from mhabench.scenario import overrides, plugins
from mhabench.views import compare as compare_output
from mhabench.views.device_mix import device_lines
from mhabench.views.gate import gate_line, unfinished_lines
from mhabench.views.run_notes import drift_lines


def compare(
    run_ref: str,
    candidate_ref: str | None,
    baseline: str,
    threshold: str,
    fail_on_regression: bool,
    on_noise: str,
    force: bool,
    process_spread: str,
    output: Path | None,
    results_root: Path,
) -> None:
    """One run: speedups over ``baseline``. Two runs: the candidate against the base, and the gate if asked."""
    if output is not None:
        compare_output.check_output_path(output)
    if on_noise not in ON_NOISE:
        raise InputError(f"--on-noise: {on_noise!r} is not one of {', '.join(ON_NOISE)}")
    if candidate_ref is None:
        if fail_on_regression:
            raise InputError("--fail-on-regression: needs two runs (RUN CANDIDATE)")
        run = require_whole(store.require_results(store.load_run(run_ref, results_root)))
        runs = [run]
        comparison, drifts = compare_mod.speedups(run, baseline), drift_lines(run.frame)
        drifts += device_lines(run_device_mix(run.frame))
    else:
        limit = stats.parse_threshold(threshold)
        base, candidate = (
            require_whole(store.require_results(store.load_run(r, results_root))) for r in (run_ref, candidate_ref)
        )
        runs = [base, candidate]
        spread = (
            compare_mod.machine_spread([base, candidate])
            if process_spread == "auto"
            else stats.parse_threshold(process_spread, "--process-spread")
        )
        comparison = compare_mod.compare_runs(base, candidate, limit, force=force, between_process_spread=spread)
        drifts = device_lines(compared_device_mix(base.frame, candidate.frame))
    out = fresh_console()
    for line in unfinished_lines(runs):
        out.print(Text(line, style="yellow"))
    if comparison.between_process_spread > 0:
        out.print(f"intervals widened by the between-process spread {comparison.between_process_spread:.1%}")
    differences = compare_output.differences_text(comparison)
    if differences is not None:
        out.print(differences)
    out.print(compare_output.compare_table(comparison, out.width))
    summary = compare_output.summary_line(comparison)
    for line in [*drifts, *([summary] if summary is not None else []), *compare_output.machine_lines(comparison)]:
        out.print(Text(line))
    if output is not None:
        compare_output.write_output(comparison, output)
        out.print(f"written: {output}")
    if fail_on_regression:
        end_with_gate(comparison, on_noise)


def ab(
    base_file: Path,
    candidate_file: Path,
    config: Path | None,
    replicates: int | None,
    threshold: str,
    fail_on_regression: bool,
    device: str | None,
    out: Path,
    output: Path | None,
) -> None:
    """Both plugin versions as two implementations of every case, in fresh processes; their change, judged."""
    if output is not None:
        compare_output.check_output_path(output)
    limit = stats.parse_threshold(threshold)
    versions = ab_run.load_versions(base_file, candidate_file, out)
    loaded = config_loading.load_config(config) if config else config_loading.load_default_config(device)
    resolved = ab_run.ab_config(overrides.with_overrides(loaded, device=device), versions, replicates)
    if resolved.replicates > 1:
        files = plugins.loaded_plugin_files()
        run_dir = replicated_run.run_replicated(resolved, out, sys.argv, files, cli_run.print_replicate).run_dir
    else:
        run_dir = runner.run(resolved, out, None, RunRequest(argv=tuple(sys.argv))).run_dir
    run = store.load_run(run_dir)
    labels = (f"{base_file} (base)", f"{candidate_file} (candidate)")
    comparison = compare_versions(run.frame, versions.pairs, limit, labels)
    out_console = fresh_console()
    out_console.print(compare_output.compare_table(comparison, out_console.width))
    for line in [compare_output.summary_line(comparison), *compare_output.machine_lines(comparison)]:
        if line:
            out_console.print(Text(line))
    out_console.print(f"results: {run_dir}")
    if output is not None:
        compare_output.write_output(comparison, output)
        out_console.print(f"written: {output}")
    if fail_on_regression:
        end_with_gate(comparison, "fail")


def end_with_gate(comparison: Comparison, on_noise: str) -> None:
    """The gate's line on stderr, then its exit code (0 no regression, 1 regression, 3 cannot judge)."""
    gate = GateResult(len(comparison.regressions), len(comparison.work_rises), len(comparison.unjudged))
    err_console.print(gate_line(gate, on_noise))
    raise typer.Exit(gate.exit_code(on_noise))
