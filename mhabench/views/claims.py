"""``mhabench claims check``'s table: each claim, what it says, and how each run graded it."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from mhabench.findings.grade import Grade, Level
from mhabench.findings.prose import measured, statement
from mhabench.findings.report import Report

GRADE_STYLE = {
    Grade.HOLDS: "green",
    Grade.HOLDS_WIDER: "yellow",
    Grade.DOES_NOT_HOLD: "bold red",
    Grade.CANNOT_TELL: "dim",
}
LEVEL_STYLE = {Level.HELD: "green", Level.SEEN_ONCE: "yellow", Level.DID_NOT_HOLD: "bold red"}


def check_table(reports: Sequence[Report]) -> Table:
    """One row per claim and run: the claim, the measured figure and its grade, the claim's level overall."""
    table = Table(title="timed claims, graded", show_lines=False)
    for column in ("page", "claim", "says", "run: measured, grade", "level"):
        table.add_column(column, overflow="fold")
    for report in reports:
        for record in report.claims:
            runs = (
                "\n".join(f"[{GRADE_STYLE[one.grade]}]{measured(one)}[/]" for one in record.grades)
                or "no run of its config"
            )
            level = f"[{LEVEL_STYLE[record.level]}]{record.level}[/]"
            table.add_row(report.page, record.claim.id, statement(record.claim), runs, level)
    return table
