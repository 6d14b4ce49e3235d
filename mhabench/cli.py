"""The command line: thin Typer commands; the work happens in the library modules."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

import mhabench
from mhabench import config as config_mod
from mhabench import display, runner
from mhabench.errors import MhabenchError
from mhabench.impls import get_spec
from mhabench.impls.registry import available_implementations

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Ablation and benchmarking lab for multi-head attention.",
    pretty_exceptions_enable=False,
)
console = Console(width=None if sys.stdout.isatty() else 140)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn mhabench's typed errors into one line on stderr and their exit code (2 input, 1 failure)."""
    try:
        yield
    except MhabenchError as exc:
        err_console.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        err_console.print("interrupted: every finished row is already on disk")
        raise typer.Exit(130) from None


def _version(value: bool) -> None:
    if value:
        console.print(f"mhabench {mhabench.__version__}")
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
) -> None:
    """Measure every implementation on every case of the scenario files."""
    with user_errors():
        loaded = [config_mod.load_config(path) for path in configs] if configs else [config_mod.load_default_config()]
        loaded = [config_mod.with_overrides(c, device=device, implementations=impl) for c in loaded]
        for config in loaded:
            if dry_run:
                console.print(display.plan_table(runner.plan(config)))
                continue
            with display.RichProgress(console) as progress:
                result = runner.run(config, out, progress=progress, argv=sys.argv)
            console.print(display.summary_table(result.rows))
            console.print(f"results: {result.run_dir}")


@app.command("list")
def list_implementations() -> None:
    """The registered implementations, one line each."""
    table = Table(show_header=True)
    table.add_column("implementation")
    table.add_column("default")
    table.add_column("what it does")
    for name in available_implementations():
        spec = get_spec(name)
        table.add_row(name, "yes" if spec.core else "", spec.description)
    console.print(table)


def main() -> None:
    app()
