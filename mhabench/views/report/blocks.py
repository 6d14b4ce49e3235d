"""What a report is made of: a list of blocks, drawn top to bottom by both renderers.

Tables are :class:`mhabench.views.table.TableModel` and images :class:`Plot` (made by :mod:`mhabench.views.plots`),
the same objects the terminal and the plots module make, so a report cannot say otherwise.
"""

from __future__ import annotations

import dataclasses

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


@dataclasses.dataclass(frozen=True)
class Plot:
    """One image of the report: PNG bytes, or the reason it was skipped."""

    name: str  # file stem, e.g. latency_vs_seq_len (latency_vs_seq_len_2 for a second image)
    title: str
    png: bytes | None
    reason: str = ""
    wide: bool = False  # a wide image (several panels, many bars): laid out across the full page width
    caption: str = ""  # how to read it: what the panels are, which implementations were left out


Block = Heading | Paragraph | TableModel | Plot | Code

SKIPPED_PLOT = "Plot skipped"
"""How the line that stands in for a plot begins; the HTML lays such lines out in the plots' grid."""


def skipped_plot(plot: Plot) -> Paragraph:
    """The line in place of a plot the data cannot support, saying why."""
    return Paragraph(f"{SKIPPED_PLOT}, {plot.title.lower()}: {plot.reason}.")


def is_skipped_plot(block: Block) -> bool:
    return isinstance(block, Paragraph) and block.text.startswith(SKIPPED_PLOT)
