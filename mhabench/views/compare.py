"""Terminal rendering of ``mhabench compare`` (rich): the manifest differences and the verdict table."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from mhabench.analysis.compare import Comparison, comparison_table
from mhabench.views.table import to_rich


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
    return to_rich(comparison_table(comparison))
