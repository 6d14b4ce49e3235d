"""report.md: the blocks as GitHub-flavoured Markdown, images linked from the ``report_plots/`` folder."""

from __future__ import annotations

from collections.abc import Sequence

from mhabench.views import table
from mhabench.views.report.blocks import Block, Heading, Paragraph, Plot
from mhabench.views.table import TableModel, md_cell

PLOTS_DIR = "report_plots"
"""The folder beside report.md that holds its images (report.html embeds them instead)."""


def to_markdown(blocks: Sequence[Block]) -> str:
    parts = []
    for block in blocks:
        if isinstance(block, Heading):
            parts.append(f"{'#' * block.level} {md_cell(block.text)}")
        elif isinstance(block, Paragraph):
            parts.append(md_cell(block.text))
        elif isinstance(block, TableModel):
            parts.append(table.to_markdown(block))
        elif isinstance(block, Plot):
            caption = f"\n\n*{md_cell(block.caption)}*" if block.caption else ""
            parts.append(f"![{md_cell(block.title)}]({PLOTS_DIR}/{block.name}.png){caption}")
        else:
            parts.append(f"```yaml\n{block.text}\n```")
    return "\n\n".join(parts) + "\n"
