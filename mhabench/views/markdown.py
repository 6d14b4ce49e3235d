"""Markdown tables, shared by ``compare --output x.md`` and ``report.md``."""

from __future__ import annotations

import html
from collections.abc import Sequence


def md_cell(value: object) -> str:
    """One cell: HTML-escaped (Markdown renderers pass raw HTML through) and with pipes escaped."""
    return html.escape(str(value), quote=False).replace("|", "\\|").replace("\n", " ")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]], right: Sequence[bool] | None = None) -> str:
    """A GitHub-flavoured Markdown table; ``right[i]`` right-aligns column i (numbers)."""
    align = right or [False] * len(headers)
    lines = [
        "| " + " | ".join(md_cell(h) for h in headers) + " |",
        "|" + "|".join("---:" if r else ":---" for r in align) + "|",
    ]
    lines += ["| " + " | ".join(md_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
