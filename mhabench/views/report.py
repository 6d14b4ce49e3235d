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
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import yaml

from mhabench.analysis.speedup import DEFAULT_BASELINE, repeat_count, repeat_spread
from mhabench.errors import InputError
from mhabench.results.schema import label
from mhabench.results.store import Run
from mhabench.views import table
from mhabench.views.markdown import md_cell
from mhabench.views.plots import Plot, all_plots
from mhabench.views.summary import results_table
from mhabench.views.table import TableModel, case_label, format_number, human_bytes, human_count

FORMATS = {"html": ("html",), "md": ("md",), "both": ("md", "html")}
PLOTS_DIR = "report_plots"


@dataclasses.dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclasses.dataclass(frozen=True)
class Paragraph:
    text: str


@dataclasses.dataclass(frozen=True)
class Code:
    text: str


Block = Heading | Paragraph | TableModel | Plot | Code


def parse_formats(text: str) -> tuple[str, ...]:
    if text not in FORMATS:
        raise InputError(f"--format: {text!r} is not one of {', '.join(FORMATS)}")
    return FORMATS[text]


# --- content -----------------------------------------------------------------------------------


def build(run: Run, baseline: str = DEFAULT_BASELINE) -> list[Block]:
    """The whole report, top to bottom: claims, summary, plots, per-scenario tables, model disagreements,
    run-to-run spread, failures, environment, config. A run without rows (a probe run) keeps only the
    claims, the environment and the config."""
    from mhabench.probe.report import claims_blocks  # deferred: the probe's report module imports this one

    return [
        Heading(f"mhabench report: {run.run_id}", 1),
        *claims_blocks(run.path),  # a run with mhabench probe's claims shows them first
        *(_result_blocks(run, baseline) if len(run.rows) else [Paragraph(_no_rows_sentence(run))]),
        Heading("Environment"),
        _environment_table(run),
        *_roofline_table(run),
        Heading("Configuration"),
        Paragraph("Command: " + " ".join(str(a) for a in run.manifest.get("command", []))),
        Code(yaml.safe_dump(run.manifest.get("config", {}), sort_keys=False).rstrip()),
    ]


def _result_blocks(run: Run, baseline: str) -> list[Block]:
    rows = run.rows
    return [
        Paragraph(_summary_sentence(run)),
        Heading("Plots"),
        *_plots(rows, baseline),
        *_scenario_sections(rows, baseline),
        *_disagreements(rows),
        *_repeat_spread(rows, baseline),
        *_failures(rows),
    ]


def _no_rows_sentence(run: Run) -> str:
    kind = "a probe run" if run.manifest.get("kind") == "probe" else f"run {run.manifest.get('status', '?')}"
    return f"No benchmark rows ({kind}): the plots and result tables are left out."


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


def _plots(rows: pd.DataFrame, baseline: str) -> list[Block]:
    blocks: list[Block] = []
    for plot in all_plots(rows, baseline):
        blocks.append(plot if plot.png else Paragraph(f"Plot skipped, {plot.title.lower()}: {plot.reason}."))
    return blocks


def _scenario_sections(rows: pd.DataFrame, baseline: str) -> list[Block]:
    blocks: list[Block] = [Heading("Results")]
    if baseline not in set(rows["impl"]):
        blocks.append(Paragraph(f"No {baseline} rows in this run: speedups are not shown."))
    for scenario, group in rows.groupby("scenario", sort=False):
        table = _with_throughput(results_table(group, baseline, title=f"Scenario {scenario}"))
        blocks += [Heading(f"Scenario {scenario}", 3), table]
        noisy = list(group["noisy"].fillna(False).astype(bool) & (group["status"] == "ok")).count(True)
        if noisy:
            blocks.append(Paragraph(f"{noisy} row(s) marked noisy: IQR above the run's noise threshold of the median."))
    return blocks


def _with_throughput(table: TableModel) -> TableModel:
    """The results table plus useful TFLOP/s (masked pairs not counted) and whether the kernel skips
    masked work, after TFLOP/s, where the run has them: a causal kernel that skips the masked half
    does half the executed FLOPs, which TFLOP/s alone would hide."""
    records = table.records if table.records is not None else pd.DataFrame()
    extra: list[tuple[str, list[str]]] = []
    if records.get("achieved_useful_tflops", pd.Series(dtype=float)).notna().any():
        extra.append(
            (label("achieved_useful_tflops"), [format_number(v, ".3f") for v in records["achieved_useful_tflops"]])
        )
    if _flag(records, "causal").any() and records.get("skips_masked_work", pd.Series(dtype=object)).notna().any():
        extra.append((label("skips_masked_work"), [_yes_no(v) for v in records["skips_masked_work"]]))
    if not extra:
        return table
    at = list(table.headers).index(label("achieved_tflops")) + 1
    return dataclasses.replace(
        table,
        headers=[*table.headers[:at], *(header for header, _ in extra), *table.headers[at:]],
        cells=[[*row[:at], *(cells[i] for _, cells in extra), *row[at:]] for i, row in enumerate(table.cells)],
        numeric=[*table.numeric[:at], *([True] * len(extra)), *table.numeric[at:]],
    )


def _yes_no(value: object) -> str:
    text = str(value).lower()
    return "yes" if text == "true" else "no" if text == "false" else "-"


def _flag(rows: pd.DataFrame, name: str) -> pd.Series:
    """A boolean column as True/False whatever the file stored (bool, "True", empty)."""
    return rows[name].astype(str).str.lower().eq("true") if name in rows else pd.Series(False, index=rows.index)


DISAGREEMENT_HEADERS = (
    "case",
    "impl",
    "FLOPs model",
    "FLOPs counted",
    "bytes model",
    "bytes counted",
    "FLOP/B model",
    "FLOP/B counted",
    "gap",
)


def _disagreements(rows: pd.DataFrame) -> list[Block]:
    """Rows whose counted FLOPs or bytes are more than 25 % from the cost model, once per (case, impl)."""
    heading = Heading("Model disagreements")
    if "measured_flops" not in rows or rows["measured_flops"].isna().all():
        return [heading, Paragraph("Not available: no row has counted FLOPs and bytes (a run older than the counter).")]
    flagged = rows[_flag(rows, "model_disagrees")].drop_duplicates(["case_id", "impl"])
    if flagged.empty:
        return [heading, Paragraph("None: every counted row is within 25 % of its cost model.")]
    cells = [
        [
            case_label(r),
            str(r["impl"]),
            human_count(r["flops"]),
            human_count(r["measured_flops"]),
            human_bytes(r["bytes_moved"]),
            human_bytes(r["measured_bytes"]),
            format_number(r["arithmetic_intensity"], ".1f"),
            format_number(r["measured_intensity"], ".1f"),
            format_number(r["model_disagreement"], ".0%"),
        ]
        for _, r in flagged.iterrows()
    ]
    text = (
        f"{len(cells)} row(s) whose FLOPs or bytes counted from the dispatched ops differ from the cost model "
        "by more than 25 %: the model does not describe what ran (gap: the larger relative difference)."
    )
    numeric = [False, False, *[True] * 7]
    return [heading, Paragraph(text), TableModel("Model disagreements", DISAGREEMENT_HEADERS, cells, numeric)]


SPREAD_HEADERS = (
    "case",
    "impl",
    "repeats",
    "median ms per repeat",
    "median ms",
    "latency spread",
    "speedup",
    "speedup spread",
)


def _repeat_spread(rows: pd.DataFrame, baseline: str) -> list[Block]:
    """Per case and implementation, how far its repeats landed apart (only for ``run --repeat N``)."""
    if repeat_count(rows) < 2:
        return []
    spread = repeat_spread(rows, baseline)
    cells = [
        [
            str(r["case"]),
            str(r["impl"]),
            str(r["repeats"]),
            " / ".join(f"{v:.3f}" for v in r["latency_ms_by_repeat"]),
            format_number(r["latency_ms"], ".3f"),
            format_number(r["latency_spread"], ".1%"),
            format_number(r["speedup"], ".2f", "×"),
            format_number(r["speedup_spread"], ".1%"),
        ]
        for _, r in spread.iterrows()
    ]
    text = (
        f"{repeat_count(rows)} repeats. Spread: (max − min) / median over the repeats where the row was ok; "
        f"speedup: median over repeats of the speedup vs {baseline}."
    )
    numeric = [False, False, *[True] * 6]
    table = TableModel("Run-to-run spread", SPREAD_HEADERS, cells, numeric, groups=list(spread["case_id"]))
    return [Heading("Run-to-run spread"), Paragraph(text), table]


def _failures(rows: pd.DataFrame) -> list[Block]:
    failed = rows[rows["status"] != "ok"]
    if failed.empty:
        return [Heading("Failed rows"), Paragraph("None: every row ran and matched the float64 reference.")]
    headers = ("scenario", "case", "impl", "status", "error")
    cells = [
        [str(r["scenario"]), case_label(r), str(r["impl"]), str(r["status"]), str(r["error"])]
        for _, r in failed.iterrows()
    ]
    return [Heading("Failed rows"), TableModel("Failed rows", headers, cells, [False] * 5, ["failed"] * len(cells))]


def _environment_table(run: Run) -> TableModel:
    facts = {
        "run id": run.run_id,
        "status": run.manifest.get("status"),
        "started": run.manifest.get("started_at"),
        "finished": run.manifest.get("finished_at"),
        **run.manifest.get("environment", {}),
    }
    return TableModel("Environment", ("field", "value"), [[k, str(v)] for k, v in facts.items()], [False, False])


def _roofline_table(run: Run) -> list[Block]:
    peaks = run.manifest.get("roofline", {})
    if not peaks:
        return []
    headers = ("dtype", "peak TFLOP/s", "peak GB/s", "source")
    cells = [
        [
            str(dtype),
            format_number(p.get("peak_tflops"), ".4g"),
            format_number(p.get("peak_gbps"), ".4g"),
            str(p.get("source")),
        ]
        for dtype, p in peaks.items()
    ]
    return [TableModel("Roofline", headers, cells, [False, True, True, False])]


# --- rendering ---------------------------------------------------------------------------------


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
        css = ' class="skipped"' if block.text.startswith("Plot skipped") else ""
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


def write_report(run: Run, out_dir: Path, formats: Sequence[str], baseline: str = DEFAULT_BASELINE) -> list[Path]:
    """Write the report files into ``out_dir``; return their paths (report.md first when both)."""
    blocks = build(run, baseline)
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
