"""``mhabench models``: the shipped model presets, one row each, with the shape a scenario's ``model:`` gets.

In a terminal the source URLs are listed under the table, each whole on one line (or under its preset's name where
the two do not fit one): folded into a table column, a URL took a dozen lines of a few characters per preset. The
Markdown table (``--markdown``) keeps them as a column.
"""

from __future__ import annotations

import dataclasses

from rich.console import Group
from rich.text import Text

from mhabench.scenario.models import PRESETS, ModelShape
from mhabench.views.table import TableModel, fit_columns, to_rich

SOURCE = "source"
HEADERS = ("preset", "d_model", "heads", "kv_heads", "head_dim", "bias", "window", "softcap", "context", SOURCE)
NUMERIC = (False, True, True, True, True, False, True, True, True, False)


def _cells(model: ModelShape) -> list[str]:
    return [
        model.name,
        str(model.d_model),
        str(model.heads),
        str(model.kv_heads),
        str(model.head_dim) + (" *" if model.head_dim_set_apart else ""),
        "yes" if model.bias else "no",
        str(model.sliding_window or "—"),
        f"{model.softcap:g}" if model.softcap else "—",
        "—" if model.max_position is None else str(model.max_position),
        model.source,
    ]


def models_table() -> TableModel:
    """Every preset in the order they are listed in :data:`PRESETS`; ``*`` marks a head_dim set apart from
    d_model / heads, the case a scenario could not describe before ``head_dim`` was a field; ``—``: not given."""
    return TableModel(
        title="model presets (model: <preset> in a scenario)",
        headers=HEADERS,
        cells=[_cells(model) for model in PRESETS.values()],
        numeric=NUMERIC,
        caption=CAPTION,
    )


CAPTION = (
    "* head_dim set apart: heads × head_dim ≠ d_model. window: sliding-window layers; context: max_position_embeddings."
)
DROPPABLE = ("context", "softcap", "bias", "window")
"""Left out, in this order, where a terminal is too narrow for the table (``--markdown`` has every column)."""


def models_view(width: int) -> Group:
    """The presets for a ``width``-column terminal: the table without its source column (and without the
    :data:`DROPPABLE` columns it cannot show), then each preset's source URL, never broken inside."""
    full = models_table()
    keep = [index for index, header in enumerate(full.headers) if header != SOURCE]
    table = dataclasses.replace(
        full,
        headers=[full.headers[i] for i in keep],
        numeric=[full.numeric[i] for i in keep],
        cells=[[row[i] for i in keep] for row in full.cells],
    )
    fitted = fit_columns(table, width, DROPPABLE)
    dropped = [header for header in table.headers if header not in fitted.headers]
    note = f" Not shown at {width} columns: {', '.join(dropped)} (mhabench models --markdown)." if dropped else ""
    return Group(to_rich(dataclasses.replace(fitted, caption=CAPTION + note)), *source_lines(width))


def source_lines(width: int) -> list[Text]:
    """``preset  URL`` per preset where that fits ``width``, else the name and the URL on the next line; a URL is
    never folded (a longer one than the terminal overflows whole, so it still copies as one)."""
    names = max(len(name) for name in PRESETS)
    urls = max(len(model.source) for model in PRESETS.values())
    one_line = 2 + names + 2 + urls <= width
    lines = [Text("sources (config.json of each preset):")]
    for name, model in PRESETS.items():
        if one_line:
            lines.append(_whole(f"  {name:<{names}}  {model.source}"))
        else:
            lines += [Text(f"  {name}:"), _whole(f"    {model.source}")]
    return lines


def _whole(line: str) -> Text:
    return Text(line, no_wrap=True, overflow="ignore")
