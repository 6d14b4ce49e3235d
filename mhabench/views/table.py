"""One table model, rendered to the terminal (rich), Markdown, HTML, CSV and JSON.

The run summary, ``compare`` and ``report`` each build a :class:`TableModel` once (formatted cells
for people, the raw records for machines) and hand it to whichever renderer the output needs, so
the three views can never disagree about what a row says. The cell formatters (numbers, bytes,
counts) are here too: every table formats a number the same way.
"""

from __future__ import annotations

import dataclasses
import html
import io
import json
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
from rich.table import Table

from mhabench.analysis.throughput import (
    EXECUTED_OVER_USEFUL,
    USEFUL_EFFICIENCY,
    USEFUL_FLOPS,
    USEFUL_INTENSITY,
    USEFUL_TFLOPS,
)

# Row style → how the terminal shows it; HTML uses the style name as the row's class.
RICH_STYLES = {
    "failed": "red",
    "winner": "bold green",
    "noisy": "yellow",
    "faster": "bold green",
    "slower": "bold red",
    "same": "dim",
    "maybe": "yellow",
    "only": "magenta",
}


@dataclasses.dataclass(frozen=True)
class TableModel:
    """Headers, formatted cells, per-row style and group starts, plus the raw records behind them."""

    title: str
    headers: Sequence[str]
    cells: Sequence[Sequence[str]]
    numeric: Sequence[bool]
    """Right-align this column (numbers)."""
    styles: Sequence[str] = ()
    """One style name per row (keys of RICH_STYLES, or "")."""
    groups: Sequence[Any] = ()
    """One group value per row; the terminal draws a line where it changes (e.g. the case)."""
    records: pd.DataFrame | None = None
    """The unformatted values, for CSV and JSON."""
    caption: str = ""
    """A line under the terminal table (e.g. which columns were left out to fit it)."""

    def style(self, index: int) -> str:
        return self.styles[index] if self.styles else ""


STATUS_WIDTH = 20  # a failure's message may be long; folded, it need not set the table's width


def natural_width(table: TableModel) -> int:
    """Terminal columns the table needs with no cell wrapped (headers may wrap at spaces)."""
    widths = []
    for index, header in enumerate(table.headers):
        cells = [len(row[index]) for row in table.cells] or [0]
        words = max((len(word) for word in header.split()), default=0)
        widths.append(max(words, min(max(cells), STATUS_WIDTH) if header == "status" else max(cells)))
    return sum(widths) + 3 * len(widths) + 1  # one space of padding each side and a border per column


def fit_columns(table: TableModel, width: int, droppable: Sequence[str]) -> TableModel:
    """``table`` without the ``droppable`` columns, first ones first, that a ``width`` terminal cannot show.

    Wrapped into lines of a few characters, a wide table cannot be read at all; the caption names
    what was left out (the CSV and ``mhabench report`` have every column).
    """
    dropped: list[str] = []
    for header in droppable:
        if natural_width(table) <= width:
            break
        if header not in table.headers:
            continue
        keep = [i for i, h in enumerate(table.headers) if h != header]
        table = dataclasses.replace(
            table,
            headers=[table.headers[i] for i in keep],
            numeric=[table.numeric[i] for i in keep],
            cells=[[row[i] for i in keep] for row in table.cells],
        )
        dropped.append(header)
    note = f"not shown at {width} columns: {', '.join(dropped)} (every column: mhabench report)" if dropped else ""
    return dataclasses.replace(table, caption=note) if note else table


def to_rich(table: TableModel) -> Table:
    out = Table(title=table.title, caption=table.caption or None)
    for index, (header, numeric) in enumerate(zip(table.headers, table.numeric, strict=True)):
        # the group label (the case) stays on one line so a narrow terminal still shows it whole
        out.add_column(header, justify="right" if numeric else "left", overflow="fold", no_wrap=index == 0)
    for index, cells in enumerate(table.cells):
        same_group = index and table.groups and table.groups[index] == table.groups[index - 1]
        if index and table.groups and not same_group:
            out.add_section()
        shown = ["", *cells[1:]] if same_group else cells  # the group's label once, on its first row
        out.add_row(*shown, style=RICH_STYLES.get(table.style(index)))
    return out


def md_cell(value: object) -> str:
    """One Markdown cell: HTML-escaped (Markdown renderers pass raw HTML through) and with pipes escaped."""
    return html.escape(str(value), quote=False).replace("|", "\\|").replace("\n", " ")


def to_markdown(table: TableModel) -> str:
    """A GitHub-flavoured Markdown table; numeric columns right-aligned."""
    lines = [
        "| " + " | ".join(md_cell(h) for h in table.headers) + " |",
        "|" + "|".join("---:" if numeric else ":---" for numeric in table.numeric) + "|",
    ]
    lines += ["| " + " | ".join(md_cell(v) for v in row) + " |" for row in table.cells]
    return "\n".join(lines)


def to_html(table: TableModel) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
    body = []
    for index, cells in enumerate(table.cells):
        tds = "".join(
            f'<td class="num">{html.escape(v)}</td>' if numeric else f"<td>{html.escape(v)}</td>"
            for v, numeric in zip(cells, table.numeric, strict=True)
        )
        style = table.style(index)
        body.append(f'<tr class="{html.escape(style)}">{tds}</tr>' if style else f"<tr>{tds}</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _records(table: TableModel) -> pd.DataFrame:
    if table.records is not None:
        return table.records
    return pd.DataFrame([list(cells) for cells in table.cells], columns=list(table.headers))


def to_csv(table: TableModel) -> str:
    buffer = io.StringIO()
    _records(table).to_csv(buffer, index=False)
    return buffer.getvalue()


def to_json_records(table: TableModel) -> list[dict[str, Any]]:
    """Raw records with NaN as null (JSON has no NaN)."""
    return json.loads(_records(table).to_json(orient="records"))


def format_number(value: Any, spec: str, suffix: str = "") -> str:
    """``value`` formatted with ``spec``, or "-" where there is no finite number (failed rows, NaN, None)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "-"
    return f"{number:{spec}}{suffix}" if math.isfinite(number) else "-"


LABELS = {
    USEFUL_FLOPS: "useful FLOPs",
    USEFUL_INTENSITY: "FLOP/B",
    USEFUL_TFLOPS: "useful TFLOP/s",
    EXECUTED_OVER_USEFUL: "executed ×",
    USEFUL_EFFICIENCY: "roofline eff.",
}
"""The results table's headers for these figures (advise and the report quote the same numbers)."""
TABLE_FORMATS = {USEFUL_INTENSITY: ".1f", USEFUL_TFLOPS: ".3f", EXECUTED_OVER_USEFUL: ".2f", USEFUL_EFFICIENCY: ".1%"}
"""How the results table prints each figure; advise prints them the same way, so a number it quotes is the one the
table shows for that row (44.5% in both, not 44.5% in one and 44 % in the other)."""


def as_in_table(value: float, name: str) -> str:
    """``value`` of the figure ``name`` as the results table prints it."""
    return format(value, TABLE_FORMATS[name])


def human_bytes(n: float) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def human_count(n: float) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f}"
