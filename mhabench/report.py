"""``mhabench report``: a run as report.md (+ PNGs) and a self-contained report.html.

The report is first built as a list of blocks (heading, paragraph, table, plot, code), then
rendered to Markdown or HTML, so both formats always say the same thing. The HTML embeds its
images as base64 PNGs and its CSS inline: one file, viewable offline, no script. Every string that
comes from the user or the run (scenario names, errors, config values) is escaped.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import yaml

from mhabench.compare import speedup_rows
from mhabench.display import case_label, format_number, human_bytes, human_count
from mhabench.errors import InputError
from mhabench.markdown import md_cell, md_table
from mhabench.plots import Plot, all_plots
from mhabench.results import Run

FORMATS = {"html": ("html",), "md": ("md",), "both": ("md", "html")}
PLOTS_DIR = "report_plots"
BASELINE = "naive"


@dataclasses.dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclasses.dataclass(frozen=True)
class Paragraph:
    text: str


@dataclasses.dataclass(frozen=True)
class TableBlock:
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]
    right: Sequence[bool]
    row_classes: Sequence[str] = ()  # "failed" | "noisy" | "" per row, for HTML highlighting


@dataclasses.dataclass(frozen=True)
class Code:
    text: str


Block = Heading | Paragraph | TableBlock | Plot | Code


def parse_formats(text: str) -> tuple[str, ...]:
    if text not in FORMATS:
        raise InputError(f"--format: {text!r} is not one of {', '.join(FORMATS)}")
    return FORMATS[text]


# --- content -----------------------------------------------------------------------------------


def build(run: Run) -> list[Block]:
    """The whole report, top to bottom: summary, plots, per-scenario tables, failures, environment, config."""
    rows = run.rows
    return [
        Heading(f"mhabench report: {run.run_id}", 1),
        Paragraph(_summary_sentence(run)),
        Heading("Plots"),
        *_plots(rows),
        *_scenario_sections(rows),
        *_failures(rows),
        Heading("Environment"),
        _environment_table(run),
        *_roofline_table(run),
        Heading("Configuration"),
        Paragraph("Command: " + " ".join(str(a) for a in run.manifest.get("command", [])) or "(unknown)"),
        Code(yaml.safe_dump(run.manifest.get("config", {}), sort_keys=False).rstrip()),
    ]


def _summary_sentence(run: Run) -> str:
    env = run.manifest.get("environment", {})
    rows = run.rows
    ok = int((rows["status"] == "ok").sum())
    return (
        f"{len(rows)} rows ({ok} ok, {len(rows) - ok} failed) over {rows['case_id'].nunique()} cases on "
        f"{env.get('device_name', '?')} ({env.get('device_kind', '?')}), torch {env.get('torch', '?')}, "
        f"{env.get('threads', '?')} threads; run {run.manifest.get('status', '?')}, "
        f"started {run.manifest.get('started_at', '?')}."
    )


def _plots(rows: pd.DataFrame) -> list[Block]:
    blocks: list[Block] = []
    for plot in all_plots(rows):
        blocks.append(plot if plot.png else Paragraph(f"Plot skipped, {plot.title.lower()}: {plot.reason}."))
    return blocks


RESULT_HEADERS = ("case", "impl", "median ms ± IQR", f"speedup vs {BASELINE}", "peak mem", "FLOPs", "bytes",
                  "FLOP/B", "TFLOP/s", "roofline eff.", "max rel err", "noisy", "status")  # fmt: skip


def _result_cells(row: pd.Series, speedup: pd.Series | None) -> list[str]:
    ok = row["status"] == "ok"
    iqr = float(row["latency_p75_ms"]) - float(row["latency_p25_ms"]) if ok else math.nan
    speed = "-"
    if speedup is not None and math.isfinite(speedup["speedup"]):
        low, high = speedup["speedup_ci_low"], speedup["speedup_ci_high"]
        interval = f" [{low:.2f}–{high:.2f}]" if math.isfinite(low) else ""
        speed = f"{speedup['speedup']:.2f}×{interval}"
    return [
        case_label(row), str(row["impl"]),
        f"{format_number(row['latency_ms'], '.3f')} ± {format_number(iqr, '.3f')}" if ok else "-", speed,
        human_bytes(row["peak_memory_bytes"]) if ok else "-", human_count(row["flops"]),
        human_bytes(row["bytes_moved"]), format_number(row["arithmetic_intensity"], ".1f"),
        format_number(row["achieved_tflops"], ".4f") if ok else "-",
        format_number(row["roofline_efficiency"], ".1%") if ok else "-",
        format_number(row["max_rel_err"], ".1e"), "⚠ noisy" if ok and bool(row["noisy"]) else "",
        "ok" if ok else f"{row['status']}: {row['error']}",
    ]  # fmt: skip


def _scenario_sections(rows: pd.DataFrame) -> list[Block]:
    has_baseline = BASELINE in set(rows["impl"])
    speed = speedup_rows(rows, BASELINE).set_index(["case_id", "impl"]) if has_baseline else None
    blocks: list[Block] = [Heading("Results")]
    if not has_baseline:
        blocks.append(Paragraph(f"No {BASELINE} rows in this run: speedups are not shown."))
    for scenario, group in rows.groupby("scenario", sort=False):
        cells, classes = [], []
        for _, row in group.iterrows():
            key = (row["case_id"], row["impl"])
            cells.append(_result_cells(row, speed.loc[key] if speed is not None and key in speed.index else None))
            classes.append("failed" if row["status"] != "ok" else "noisy" if bool(row["noisy"]) else "")
        noisy = classes.count("noisy")
        blocks += [
            Heading(f"Scenario {scenario}", 3),
            TableBlock(RESULT_HEADERS, cells, _right(RESULT_HEADERS), classes),
        ]
        if noisy:
            blocks.append(
                Paragraph(f"{noisy} row(s) marked ⚠ noisy: IQR above the run's noise threshold of the median.")
            )
    return blocks


def _right(headers: Sequence[str]) -> list[bool]:
    return [h not in ("case", "impl", "noisy", "status", "field", "value", "scenario", "error") for h in headers]


def _failures(rows: pd.DataFrame) -> list[Block]:
    failed = rows[rows["status"] != "ok"]
    if failed.empty:
        return [Heading("Failed rows"), Paragraph("None: every row ran and matched the float64 reference.")]
    headers = ("scenario", "case", "impl", "status", "error")
    cells = [[str(r["scenario"]), case_label(r), str(r["impl"]), str(r["status"]), str(r["error"])]
             for _, r in failed.iterrows()]  # fmt: skip
    return [Heading("Failed rows"), TableBlock(headers, cells, [False] * 5, ["failed"] * len(cells))]


def _environment_table(run: Run) -> TableBlock:
    facts = {"run id": run.run_id, "status": run.manifest.get("status"),
             "started": run.manifest.get("started_at"), "finished": run.manifest.get("finished_at"),
             **run.manifest.get("environment", {})}  # fmt: skip
    return TableBlock(("field", "value"), [[k, str(v)] for k, v in facts.items()], [False, False])


def _roofline_table(run: Run) -> list[Block]:
    peaks = run.manifest.get("roofline", {})
    if not peaks:
        return []
    headers = ("dtype", "peak TFLOP/s", "peak GB/s", "source")
    cells = [
        [str(dtype), format_number(p.get("peak_tflops"), ".4g"), format_number(p.get("peak_gbps"), ".4g"),
         str(p.get("source"))]
        for dtype, p in peaks.items()
    ]  # fmt: skip
    return [TableBlock(headers, cells, [False, True, True, False])]


# --- rendering ---------------------------------------------------------------------------------


def to_markdown(blocks: Sequence[Block]) -> str:
    parts = []
    for block in blocks:
        if isinstance(block, Heading):
            parts.append(f"{'#' * block.level} {md_cell(block.text)}")
        elif isinstance(block, Paragraph):
            parts.append(md_cell(block.text))
        elif isinstance(block, TableBlock):
            parts.append(md_table(block.headers, block.rows, block.right))
        elif isinstance(block, Plot):
            parts.append(f"![{md_cell(block.title)}]({PLOTS_DIR}/{block.name}.png)")
        else:
            parts.append(f"```yaml\n{block.text}\n```")
    return "\n\n".join(parts) + "\n"


CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2330;
       margin: 0 auto; padding: 1.5rem 2rem; max-width: 1500px; background: #fff; }
h1 { font-size: 1.6rem; margin: 0 0 .4rem; } h2 { border-bottom: 2px solid #e3e7ef; padding-bottom: .2rem;
     margin-top: 2rem; } h3 { margin: 1.4rem 0 .5rem; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 1rem; }
figure { margin: 0; border: 1px solid #e3e7ef; border-radius: 6px; padding: .5rem; background: #fafbfd; }
figure img { max-width: 100%; height: auto; display: block; margin: 0 auto; }
figure.wide { grid-column: 1 / -1; }
.scroll { overflow-x: auto; } td:first-child { white-space: nowrap; }
table { border-collapse: collapse; margin: .4rem 0 1rem; font-size: 12.5px; }
th, td { border: 1px solid #dfe3ea; padding: 3px 8px; vertical-align: top; }
th { background: #f1f4f9; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums;
  white-space: nowrap; }
tr.noisy td { background: #fff8e1; } tr.failed td { background: #fdecea; }
pre { background: #f6f8fa; border: 1px solid #e3e7ef; padding: .8rem; overflow-x: auto; font-size: 12.5px; }
p.skipped { color: #8a5a00; }
"""


def _html_table(block: TableBlock) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in block.headers)
    body = []
    classes = list(block.row_classes) or [""] * len(block.rows)
    for row, row_class in zip(block.rows, classes, strict=True):
        cells = "".join(
            f'<td class="num">{html.escape(v)}</td>' if right else f"<td>{html.escape(v)}</td>"
            for v, right in zip(row, block.right, strict=True)
        )
        body.append(f'<tr class="{html.escape(row_class)}">{cells}</tr>' if row_class else f"<tr>{cells}</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _html_block(block: Block) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{html.escape(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        css = ' class="skipped"' if block.text.startswith("Plot skipped") else ""
        return f"<p{css}>{html.escape(block.text)}</p>"
    if isinstance(block, TableBlock):
        return _html_table(block)
    if isinstance(block, Plot):
        data = base64.b64encode(block.png or b"").decode("ascii")
        title = html.escape(block.title)
        css = ' class="wide"' if block.wide else ""
        return f'<figure{css}><img src="data:image/png;base64,{data}" alt="{title}"></figure>'
    return f"<pre><code>{html.escape(block.text)}</code></pre>"


def to_html(blocks: Sequence[Block]) -> str:
    """One self-contained page: inline CSS, base64 images, plots side by side in a grid."""
    parts: list[str] = []
    index = 0
    while index < len(blocks):
        if isinstance(blocks[index], Plot | Paragraph) and _in_plot_run(blocks, index):
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
    """Plots (and their 'skipped' notes) are laid out together in one grid."""
    block = blocks[index]
    return isinstance(block, Plot) or (isinstance(block, Paragraph) and block.text.startswith("Plot skipped"))


# --- files -------------------------------------------------------------------------------------


def write_report(run: Run, out_dir: Path, formats: Sequence[str]) -> list[Path]:
    """Write the report files into ``out_dir``; return their paths (report.md first when both)."""
    blocks = build(run)
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
