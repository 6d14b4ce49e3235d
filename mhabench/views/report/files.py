"""The report on disk: report.md with its images in ``report_plots/``, and report.html, in the chosen folder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mhabench.errors import InputError
from mhabench.views import formats
from mhabench.views.report.blocks import Block, Plot
from mhabench.views.report.html import to_html
from mhabench.views.report.markdown import PLOTS_DIR, to_markdown

FORMATS = {"html": ("html",), "md": ("md",), "both": ("md", "html")}


def parse_formats(text: str) -> tuple[str, ...]:
    """``--format``: html | md | both, as the formats to write."""
    return FORMATS[formats.parse_format(text, tuple(FORMATS))]


def write_report(blocks: Sequence[Block], out_dir: Path, formats: Sequence[str]) -> list[Path]:
    """Write the report files into ``out_dir``; return their paths (report.md first when both)."""
    written = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        if "md" in formats:
            written.append(_write_markdown(blocks, out_dir))
        if "html" in formats:
            path = out_dir / "report.html"
            path.write_text(to_html(blocks), encoding="utf-8")
            written.append(path)
    except OSError as exc:
        raise InputError(f"--out: {out_dir}: cannot write the report ({exc.strerror or exc})") from None
    return written


def _write_markdown(blocks: Sequence[Block], out_dir: Path) -> Path:
    plots_dir = out_dir / PLOTS_DIR
    plots_dir.mkdir(exist_ok=True)
    for block in blocks:
        if isinstance(block, Plot) and block.png:
            (plots_dir / f"{block.name}.png").write_bytes(block.png)
    path = out_dir / "report.md"
    path.write_text(to_markdown(blocks), encoding="utf-8")
    return path
