"""``mhabench claims``: the findings pages' timed claims (``check`` grades them against fresh or given runs)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer

from mhabench.cli_shell import OneLineErrors, console, err_console, user_errors

claims_app = typer.Typer(
    cls=OneLineErrors,
    no_args_is_help=True,
    help="The findings pages' timed claims: grade them against fresh or given runs.",
)


@claims_app.command("check")
def check(
    page: Annotated[str, typer.Argument(metavar="PAGE|all", help="A findings page (decode, decode.md) or all.")],
    sittings: Annotated[
        int, typer.Option("--sittings", min=1, help="Sittings to run, one after another (each runs every config).")
    ] = 1,
    from_runs: Annotated[
        list[Path] | None, typer.Option("--from", help="Grade these run folders instead of running (repeatable).")
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Where fresh runs are written.")] = Path("results"),
    findings: Annotated[Path, typer.Option("--findings", help="The findings folder.")] = Path("docs/findings"),
    write: Annotated[
        bool, typer.Option("--write/--no-write", help="Store the reports and re-render the pages' claim sentences.")
    ] = True,
) -> None:
    """Re-run a page's configs in fresh processes (or take --from runs) and grade every timed claim.

    Exits 1 when a claim does not hold. Slow (every config with its replicates, per sitting): not for CI."""
    from mhabench.findings import check as checking
    from mhabench.views.claims import check_table

    with user_errors():
        pages = checking.pages_named(findings, page)
        if from_runs:
            runs = checking.given_runs(from_runs)
        else:
            claims = [block.claim for one in pages for block in checking.blocks_of(one)]
            runs = checking.sittings(claims, sittings, out, lambda line: err_console.print(line, highlight=False))
        reports = checking.check(pages, runs, dt.datetime.now(dt.UTC))
        console.print(check_table(reports))
        if write:
            checking.write(findings, reports)
        failed = [record.claim.id for report in reports for record in report.failed]
        if failed:
            err_console.print(f"does not hold: {', '.join(failed)}", highlight=False)
            raise typer.Exit(1)
