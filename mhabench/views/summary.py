"""Terminal output and the results table: the progress bar, the run summary, the dry-run plan.

:func:`results_table` is the one results table: a small run's summary prints it, the report renders
it per scenario to Markdown and HTML. Above ``COMPACT_ABOVE_ROWS`` rows a table of every row is
unreadable in a terminal, so :func:`run_summary` prints one line per case instead (its winner and
paired speedup) with the counts by status, and points to the files and the report. Speedups come
from :mod:`mhabench.analysis.speedup`.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from mhabench.analysis.speedup import (
    DEFAULT_BASELINE,
    MEDIANS,
    PAIRED,
    case_winners,
    repeat_count,
    speedup_rows,
    spread_of,
)
from mhabench.results.schema import label
from mhabench.results.store import CSV_NAME, PARQUET_NAME
from mhabench.views.table import TableModel, case_label, fit_columns, format_number, human_bytes, human_count, to_rich

COMPACT_ABOVE_ROWS = 40
"""A run with more rows than this gets the compact summary: about a terminal screen of table."""
STATUSES = ("ok", "mismatch", "unsupported", "skipped", "oom", "error", "timeout", "crashed")
"""Every row status, in the order the summary counts them."""


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
    """``1.23× [1.20–1.26]``: the speedup over the baseline and its 95% bootstrap interval."""
    value = row.get("speedup")
    if value is None or not math.isfinite(float(value)):
        return "-"
    low, high = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    interval = f" [{low:.2f}–{high:.2f}]" if low is not None and math.isfinite(float(low)) else ""
    return f"{float(value):.2f}×{interval}"


def method_phrase(methods: Iterable[str]) -> str:
    """What a table's speedups are, for its title (a run older than interleaved timing has no rounds)."""
    found = {str(method) for method in methods if method}
    if found == {MEDIANS}:
        return "ratio of medians"
    if found <= {PAIRED}:
        return "median of per-round ratios"
    return "median of per-round ratios, ratio of medians where rounds do not align"


def status_text(row: pd.Series) -> str:
    text = "ok" if row["status"] == "ok" else f"{row['status']}: {row.get('error') or ''}"
    return text + (" (noisy)" if row["status"] == "ok" and bool(row.get("noisy")) else "")


def _latency_text(row: pd.Series) -> str:
    if row["status"] != "ok":
        return "-"
    iqr = float(row["latency_p75_ms"]) - float(row["latency_p25_ms"])
    return f"{format_number(row['latency_ms'], '.3f')} ({format_number(iqr, '.3f')})"


def _columns(baseline: str, with_compile: bool, with_repeats: bool) -> list[tuple[str, Callable[[pd.Series], str]]]:
    """The results table's columns: header and cell. ``rep`` and the spread only for ``--repeat N``."""
    columns: list[tuple[str, Callable[[pd.Series], str]]] = [("case", case_label), ("impl", lambda r: str(r["impl"]))]
    columns += [(label("repeat"), lambda r: str(r["repeat"]))] if with_repeats else []
    columns += [("median ms (IQR)", _latency_text), (f"speedup vs {baseline}", speedup_text)]
    columns += [("speedup spread", lambda r: format_number(r["speedup_spread"], ".1%"))] if with_repeats else []
    columns += [
        (label("peak_memory_bytes"), lambda r: human_bytes(r.get("peak_memory_bytes")) if r["status"] == "ok" else "-"),
        (label("flops"), lambda r: human_count(r.get("flops"))),
        (label("bytes_moved"), lambda r: human_bytes(r.get("bytes_moved"))),
        (label("arithmetic_intensity"), lambda r: format_number(r.get("arithmetic_intensity"), ".1f")),
        (label("achieved_tflops"), lambda r: format_number(r.get("achieved_tflops"), ".3f")),
        (label("roofline_efficiency"), lambda r: format_number(r.get("roofline_efficiency"), ".1%")),
        (label("max_rel_err"), lambda r: format_number(r.get("max_rel_err"), ".1e")),
    ]
    columns += [("compile s", lambda r: format_number(r.get("compile_time_s"), ".1f"))] if with_compile else []
    return [*columns, ("status", status_text)]


def _with_spread(frame: pd.DataFrame) -> pd.DataFrame:
    """Each row with its (case, impl)'s run-to-run speedup spread over the repeats."""
    spread = spread_of(frame).set_index(["case_id", "impl"])["speedup_spread"].to_dict()
    keys = zip(frame["case_id"], frame["impl"], strict=True)
    return frame.assign(speedup_spread=[spread.get(key, math.nan) for key in keys])


def results_table(rows: pd.DataFrame, baseline: str = DEFAULT_BASELINE, title: str = "") -> TableModel:
    """Per (case, implementation): median latency (IQR), speedup over ``baseline`` with CI, memory, cost.

    A "compile s" column appears when an implementation compiled on its first call; a ``--repeat N``
    run shows each row's repeat and the (case, implementation)'s speedup spread over the repeats.
    """
    frame = speedup_rows(rows, baseline)
    with_repeats = repeat_count(frame) > 1
    frame = _with_spread(frame) if with_repeats else frame
    with_compile = "compile_time_s" in frame and bool(frame["compile_time_s"].notna().any())
    columns = _columns(baseline, with_compile, with_repeats)
    headers = [header for header, _ in columns]
    cells = [[cell(row) for _, cell in columns] for _, row in frame.iterrows()]
    styles = [
        "failed" if r["status"] != "ok" else "winner" if r.get("winner") else "noisy" if bool(r.get("noisy")) else ""
        for _, r in frame.iterrows()
    ]
    numeric = [h not in ("case", "impl", "status") for h in headers]
    methods = frame.get("speedup_method", pd.Series(dtype=str))
    title = title or f"mhabench run (speedup vs {baseline}: {method_phrase(methods)}, 95% bootstrap CI)"
    return TableModel(title, headers, cells, numeric, styles, list(frame.get("case_id", [])), frame)


# --- the compact summary of a large run ----------------------------------------------------------


def status_counts(statuses: Iterable[str]) -> dict[str, int]:
    """Rows per status, in ``STATUSES`` order (see :func:`ordered_counts`)."""
    return ordered_counts(collections.Counter(str(status) for status in statuses))


def ordered_counts(counts: dict[str, int]) -> dict[str, int]:
    """The known statuses in ``STATUSES`` order, then any other; zero counts left out."""
    order = [*STATUSES, *sorted(set(counts) - set(STATUSES))]
    return {status: int(counts[status]) for status in order if counts.get(status)}


def _counts_text(counts: dict[str, int], without: str = "") -> str:
    return ", ".join(f"{status} {count}" for status, count in ordered_counts(counts).items() if status != without)


def compact_table(rows: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> TableModel:
    """One line per case: the winner, its median latency and speedup over ``baseline``, rows not ok."""
    winners = case_winners(rows, baseline)
    with_repeats = repeat_count(rows) > 1
    headers = [
        "case",
        "winner",
        "median ms",
        f"speedup vs {baseline}",
        "method",
        *(["speedup spread"] if with_repeats else []),
        "not ok",
    ]
    cells = [
        [
            line["case"],
            line["winner"] or "-",
            format_number(line.get("latency_ms"), ".3f"),
            speedup_text(line),
            line.get("speedup_method") or "-",
            *([format_number(line.get("speedup_spread"), ".1%")] if with_repeats else []),
            _counts_text(line["statuses"], without="ok"),
        ]
        for _, line in winners.iterrows()
    ]
    styles = ["" if line["winner"] else "failed" for _, line in winners.iterrows()]
    numeric = [h in ("median ms", f"speedup vs {baseline}", "speedup spread") for h in headers]
    methods = winners.get("speedup_method", pd.Series(dtype=str))
    over = f"median over {repeat_count(rows)} repeats" if with_repeats else "95% bootstrap CI"
    title = (
        f"{len(rows)} rows over {len(winners)} cases, the winner of each "
        f"(speedup vs {baseline}: {method_phrase(methods)}, {over})"
    )
    return TableModel(title, headers, cells, numeric, styles, records=winners)


# Left out of the run summary, in this order, while the terminal is too narrow for it.
DROPPABLE = tuple(
    label(name)
    for name in ("bytes_moved", "flops", "achieved_tflops", "max_rel_err", "arithmetic_intensity", "peak_memory_bytes")
)


def run_summary(rows: pd.DataFrame, baseline: str, run_dir: Path, width: int | None = None) -> list[RenderableType]:
    """What ``mhabench run`` prints at the end: every row for a small run (columns that a ``width``
    terminal cannot show left out); above ``COMPACT_ABOVE_ROWS`` rows, the compact table, the counts
    by status and where every row is."""
    if len(rows) <= COMPACT_ABOVE_ROWS:
        table = results_table(rows, baseline)
        return [to_rich(fit_columns(table, width, DROPPABLE) if width else table)]
    return [
        to_rich(compact_table(rows, baseline)),
        Text(f"rows by status: {_counts_text(status_counts(rows['status']))}"),
        Text(
            f"every row: {run_dir / CSV_NAME} and {PARQUET_NAME} (raw samples); tables and plots: "
            f"mhabench report {run_dir}"
        ),
    ]


def plan_table(rows: pd.DataFrame) -> TableModel:
    """``--dry-run``: the cases and their modelled cost, nothing run."""
    headers = ["case", "impl", "FLOPs", "bytes moved", "FLOP/B", "predicted peak mem"]
    cells = [
        [
            str(r["case_id"]),
            str(r["impl"]),
            human_count(r["flops"]),
            human_bytes(r["bytes_moved"]),
            format_number(r["arithmetic_intensity"], ".1f"),
            human_bytes(r["predicted_peak_bytes"]),
        ]
        for _, r in rows.iterrows()
    ]
    title = "mhabench run --dry-run (modelled, nothing measured)"
    return TableModel(title, headers, cells, [False, False, True, True, True, True], records=rows)
