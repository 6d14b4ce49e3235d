"""What ``mhabench explain`` shows: per slower row (or each row asked about), its sentence and its stages against
the model.

The figures and findings come from :mod:`mhabench.analysis.explain`, the sentence from :mod:`mhabench.views.wording`;
this module lays them out as the terminal (rich), Markdown or JSON (the figures and codes, no sentences), so the
formats cannot say different things.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence

from rich.console import RenderableType
from rich.text import Text

from mhabench.analysis.explain.explain import Explanation
from mhabench.errors import InputError
from mhabench.results.stages import StageFigures
from mhabench.stage_cost import STAGE_LABELS
from mhabench.views.table import TableModel, format_number, human_bytes, human_count, to_markdown, to_rich
from mhabench.views.wording import explanation as sentence

FORMATS = ("terminal", "markdown", "md", "json")
NOTHING = (
    "No implementation is 3 % or more slower than its case's fastest: nothing to explain "
    "(--impl NAME breaks down any implementation, the fastest included)."
)


def parse_format(text: str) -> str:
    if text not in FORMATS:
        raise InputError(f"--format: {text!r} is not one of {', '.join(FORMATS)}")
    return "markdown" if text == "md" else text


def stage_table(explanation: Explanation) -> TableModel:
    """The row's stages: time share, what ran and what the model says, and the longest op."""
    headers = ["stage", "time share", "FLOPs", "model FLOPs", "×", "bytes", "model bytes", "×", "longest op"]
    cells = [_cells(figure) for figure in explanation.stages]
    title = f"{explanation.case_label}: {explanation.impl} (breakdown from {explanation.source})"
    return TableModel(title, headers, cells, [False] + [True] * 7 + [False])


def _cells(figure: StageFigures) -> list[str]:
    share = "" if math.isnan(figure.time_share) else f"{100 * figure.time_share:.0f} %"
    top = figure.top_op + (f" ×{figure.top_op_count}" if figure.top_op_count > 1 else "")
    return [
        STAGE_LABELS.get(figure.stage, figure.stage),
        share,
        _or_blank(figure.flops, human_count),
        _or_blank(figure.model_flops, human_count),
        _or_blank(figure.flops_ratio, lambda ratio: format_number(ratio, ".2f")),
        _or_blank(figure.bytes_moved, human_bytes),
        _or_blank(figure.model_bytes, human_bytes),
        _or_blank(figure.bytes_ratio, lambda ratio: format_number(ratio, ".3g")),
        top,
    ]


def _or_blank(value: float | None, show: Callable[[float], str]) -> str:
    return "" if value is None else show(value)


def to_terminal(explanations: Sequence[Explanation]) -> list[RenderableType]:
    """Each explanation's sentence with its stage table under it: the sentence names one stage, the table shows
    the others it was chosen over."""
    if not explanations:
        return [Text(NOTHING)]
    shown: list[RenderableType] = []
    for explanation in explanations:
        shown.append(Text(f"{explanation.case_label}: {sentence(explanation)}"))
        if explanation.stages:
            shown.append(to_rich(stage_table(explanation)))
    return shown


def to_markdown_text(explanations: Sequence[Explanation]) -> str:
    """The same as :func:`to_terminal`, as a Markdown list with a table under each item."""
    if not explanations:
        return NOTHING
    parts = []
    for explanation in explanations:
        parts.append(f"- **{explanation.case_label}**: {sentence(explanation)}")
        if explanation.stages:
            parts.append("\n" + to_markdown(stage_table(explanation)))
    return "\n".join(parts)


def to_json(explanations: Sequence[Explanation]) -> str:
    return json.dumps([explanation.record() for explanation in explanations], indent=2, allow_nan=False, default=str)
