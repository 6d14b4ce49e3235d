"""Terminal output and the results table: the progress bar, the run summary, the dry-run plan.

:func:`results_table` is the one results table: the run summary prints it, the report renders it
per scenario to Markdown and HTML. Speedups come from :func:`mhabench.speedup.speedup_rows`.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from mhabench.schema import label
from mhabench.speedup import DEFAULT_BASELINE, speedup_rows
from mhabench.table import TableModel, case_label, format_number, human_bytes, human_count


class RichProgress:
    """The runner's ``Progress``: a bar with ETA and the (case, implementation) being measured."""

    def __init__(self, console: Console) -> None:
        self._bar = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._task: Any = None

    def __enter__(self) -> RichProgress:
        self._bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.__exit__(*exc)

    def start(self, total: int) -> None:
        self._task = self._bar.add_task("measuring", total=total)

    def advance(self, label: str) -> None:
        self._bar.update(self._task, advance=1, description=label)


def speedup_text(row: pd.Series) -> str:
    """``1.23× [1.20–1.26]``: the paired-free ratio of medians and its 95% bootstrap interval."""
    value = row.get("speedup")
    if value is None or not math.isfinite(float(value)):
        return "-"
    low, high = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    interval = f" [{low:.2f}–{high:.2f}]" if low is not None and math.isfinite(float(low)) else ""
    return f"{float(value):.2f}×{interval}"


def status_text(row: pd.Series) -> str:
    text = "ok" if row["status"] == "ok" else f"{row['status']}: {row.get('error') or ''}"
    return text + (" (noisy)" if row["status"] == "ok" and bool(row.get("noisy")) else "")


def _row_cells(row: pd.Series, with_compile: bool) -> list[str]:
    ok = row["status"] == "ok"
    iqr = float(row["latency_p75_ms"]) - float(row["latency_p25_ms"]) if ok else math.nan
    cells = [
        case_label(row), str(row["impl"]),
        f"{format_number(row['latency_ms'], '.3f')} ({format_number(iqr, '.3f')})" if ok else "-",
        speedup_text(row), human_bytes(row.get("peak_memory_bytes")) if ok else "-",
        human_count(row.get("flops")), human_bytes(row.get("bytes_moved")),
        format_number(row.get("arithmetic_intensity"), ".1f"),
        format_number(row.get("achieved_tflops"), ".3f"), format_number(row.get("roofline_efficiency"), ".1%"),
        format_number(row.get("max_rel_err"), ".1e"),
    ]  # fmt: skip
    if with_compile:
        cells.append(format_number(row.get("compile_time_s"), ".1f"))
    return [*cells, status_text(row)]


def results_table(rows: pd.DataFrame, baseline: str = DEFAULT_BASELINE, title: str = "") -> TableModel:
    """Per (case, implementation): median latency (IQR), speedup over ``baseline`` with CI, memory, cost.

    A "compile s" column appears when an implementation compiled on its first call.
    """
    frame = speedup_rows(rows, baseline)
    with_compile = "compile_time_s" in frame and bool(frame["compile_time_s"].notna().any())
    headers = ["case", "impl", "median ms (IQR)", f"speedup vs {baseline}", label("peak_memory_bytes"),
               label("flops"), label("bytes_moved"), label("arithmetic_intensity"), label("achieved_tflops"),
               label("roofline_efficiency"), label("max_rel_err")]  # fmt: skip
    headers += ["compile s"] if with_compile else []
    headers.append("status")
    cells = [_row_cells(row, with_compile) for _, row in frame.iterrows()]
    styles = [
        "failed" if r["status"] != "ok" else "winner" if r.get("winner") else "noisy" if bool(r.get("noisy")) else ""
        for _, r in frame.iterrows()
    ]
    numeric = [h not in ("case", "impl", "status") for h in headers]
    title = title or f"mhabench run (speedup vs {baseline}: ratio of medians, 95% bootstrap CI)"
    return TableModel(title, headers, cells, numeric, styles, list(frame.get("case_id", [])), frame)


def plan_table(rows: pd.DataFrame) -> TableModel:
    """``--dry-run``: the cases and their modelled cost, nothing run."""
    headers = ["case", "impl", "FLOPs", "bytes moved", "FLOP/B", "predicted peak mem"]
    cells = [
        [str(r["case_id"]), str(r["impl"]), human_count(r["flops"]), human_bytes(r["bytes_moved"]),
         format_number(r["arithmetic_intensity"], ".1f"), human_bytes(r["predicted_peak_bytes"])]
        for _, r in rows.iterrows()
    ]  # fmt: skip
    title = "mhabench run --dry-run (modelled, nothing measured)"
    return TableModel(title, headers, cells, [False, False, True, True, True, True], records=rows)
