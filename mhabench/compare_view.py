"""Terminal rendering of ``mhabench compare`` (rich): the manifest differences and the verdict table."""

from __future__ import annotations

import pandas as pd
from rich.table import Table
from rich.text import Text

from mhabench import stats
from mhabench.compare import Comparison, markdown_rows

VERDICT_STYLES = {
    "faster": "bold green",
    "slower": "bold red",
    "same": "dim",
    "~": "yellow",
    "only in base": "magenta",
    "only in candidate": "cyan",
    "not compared": "red",
}


def differences_text(comparison: Comparison) -> Text | None:
    """What differs between the two manifests, shown above the table (None when nothing does)."""
    if not comparison.differences:
        return None
    text = Text("Runs differ in:\n", style="bold yellow")
    for difference in comparison.differences:
        text.append(f"  {difference.field}: ", style="yellow")
        text.append(f"{difference.base} → {difference.candidate}\n")
    return text


def compare_table(comparison: Comparison) -> Table:
    """The comparison as a rich table; verdicts (two runs) or winners and failures (one run) in colour."""
    headers, cells, right = markdown_rows(comparison)
    if comparison.candidate_id is None:
        title = f"{comparison.base_id}: speedup vs {comparison.baseline} (ratio of medians, 95% bootstrap CI)"
    else:
        title = (
            f"{comparison.base_id} → {comparison.candidate_id}: candidate/base median "
            f"(threshold {comparison.threshold:.1%}, Holm-corrected α = {stats.ALPHA})"
        )
    table = Table(title=title)
    for header, is_right in zip(headers, right, strict=True):
        table.add_column(header, justify="right" if is_right else "left", overflow="fold")
    previous_case = None
    for (_, row), cell_values in zip(comparison.rows.iterrows(), cells, strict=True):
        if previous_case is not None and row["case"] != previous_case:
            table.add_section()
        previous_case = row["case"]
        table.add_row(*cell_values, style=_row_style(comparison, row))
    return table


def _row_style(comparison: Comparison, row: pd.Series) -> str | None:
    if comparison.candidate_id is not None:
        return VERDICT_STYLES.get(str(row["verdict"]))
    if row["status"] != "ok":
        return "red"
    return "bold green" if row["winner"] else None
