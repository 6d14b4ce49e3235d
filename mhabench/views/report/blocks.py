"""What a report is made of: a list of blocks, drawn top to bottom by both renderers.

Tables are :class:`mhabench.views.table.TableModel` and images :class:`mhabench.views.plots.Plot`,
the same objects the terminal and the plots module make, so a report cannot say otherwise.
"""

from __future__ import annotations

import dataclasses

from mhabench.views.plots import Plot
from mhabench.views.table import TableModel


@dataclasses.dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclasses.dataclass(frozen=True)
class Paragraph:
    text: str


@dataclasses.dataclass(frozen=True)
class Code:
    """A YAML listing (the resolved configuration)."""

    text: str


Block = Heading | Paragraph | TableModel | Plot | Code

SKIPPED_PLOT = "Plot skipped"
"""How the line that stands in for a plot begins; the HTML lays such lines out in the plots' grid."""


def skipped_plot(plot: Plot) -> Paragraph:
    """The line in place of a plot the data cannot support, saying why."""
    return Paragraph(f"{SKIPPED_PLOT}, {plot.title.lower()}: {plot.reason}.")


def is_skipped_plot(block: Block) -> bool:
    return isinstance(block, Paragraph) and block.text.startswith(SKIPPED_PLOT)
