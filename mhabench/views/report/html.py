"""report.html: the blocks as one self-contained page (inline CSS, base64 images, no script, nothing fetched)."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence

from mhabench.views import table
from mhabench.views.report.blocks import Block, Heading, Paragraph, Plot, is_skipped_plot
from mhabench.views.table import TableModel

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2330;
       margin: 0 auto; padding: 1.5rem 2rem; max-width: 1500px; background: #fff; }
h1 { font-size: 1.6rem; margin: 0 0 .4rem; } h2 { border-bottom: 2px solid #e3e7ef; padding-bottom: .2rem;
     margin-top: 2rem; } h3 { margin: 1.4rem 0 .5rem; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 1rem; }
figure { margin: 0; border: 1px solid #e3e7ef; border-radius: 6px; padding: .5rem; background: #fafbfd; }
figure img { max-width: 100%; height: auto; display: block; margin: 0 auto; }
figure.wide { grid-column: 1 / -1; } figcaption { font-size: 12.5px; color: #4a5263; margin-top: .3rem; }
.scroll { overflow-x: auto; } td:first-child { white-space: nowrap; }
table { border-collapse: collapse; margin: .4rem 0 1rem; font-size: 12.5px; }
th, td { border: 1px solid #dfe3ea; padding: 3px 8px; vertical-align: top; }
th { background: #f1f4f9; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums;
  white-space: nowrap; }
tr.noisy td { background: #fff8e1; } tr.failed td { background: #fdecea; } tr.winner td { font-weight: 600; }
pre { background: #f6f8fa; border: 1px solid #e3e7ef; padding: .8rem; overflow-x: auto; font-size: 12.5px; }
p.skipped { color: #8a5a00; }
"""


def _html_block(block: Block) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{html.escape(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        css = ' class="skipped"' if is_skipped_plot(block) else ""
        return f"<p{css}>{html.escape(block.text)}</p>"
    if isinstance(block, TableModel):
        return table.to_html(block)
    if isinstance(block, Plot):
        data = base64.b64encode(block.png or b"").decode("ascii")
        title = html.escape(block.title)
        css = ' class="wide"' if block.wide else ""
        caption = f"<figcaption>{html.escape(block.caption)}</figcaption>" if block.caption else ""
        return f'<figure{css}><img src="data:image/png;base64,{data}" alt="{title}">{caption}</figure>'
    return f"<pre><code>{html.escape(block.text)}</code></pre>"


def to_html(blocks: Sequence[Block]) -> str:
    """One self-contained page: inline CSS, base64 images, plots side by side in a grid."""
    parts: list[str] = []
    index = 0
    while index < len(blocks):
        if _in_plot_run(blocks, index):
            figures = []
            while index < len(blocks) and _in_plot_run(blocks, index):
                figures.append(_html_block(blocks[index]))
                index += 1
            parts.append(f'<div class="plots">{"".join(figures)}</div>')
            continue
        parts.append(_html_block(blocks[index]))
        index += 1
    title = html.escape(blocks[0].text if isinstance(blocks[0], Heading) else "mhabench report")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head>\n'
        f"<body>\n" + "\n".join(parts) + "\n</body></html>\n"
    )


def _in_plot_run(blocks: Sequence[Block], index: int) -> bool:
    """Plots (and the lines that stand in for skipped ones) are laid out together in one grid."""
    return isinstance(blocks[index], Plot) or is_skipped_plot(blocks[index])
