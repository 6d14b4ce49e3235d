"""A replicated run's results table: one pooled row per case and implementation, not one per process.

``mhabench run`` with ``replicates: N`` and ``mhabench report`` on such a run print this table instead of the
per-process one (:mod:`mhabench.analysis.pooled_rows` says what a pooled row holds); each process's rows stay
in the run's files, and ``report --replicate-rows`` adds their table. A run of one process never reaches this
module: its table is :func:`mhabench.views.summary.results_table`, unchanged. The columns are the results
table's, with the process count and the between-process range of the speedup added, and the latency's
spread given as the processes' range rather than one process's IQR.
"""

from __future__ import annotations

import pandas as pd
from rich.console import RenderableType
from rich.text import Text

from mhabench.analysis.pooled_rows import (
    LATENCY_PROCESS_MAX_MS,
    LATENCY_PROCESS_MIN_MS,
    PROCESSES,
    PROCESSES_OK,
    SPEEDUP_PROCESS_RANGE,
    pooled_rows,
)
from mhabench.analysis.speedup import DEFAULT_BASELINE, speedup_rows
from mhabench.analysis.spread import repeat_count
from mhabench.analysis.throughput import throughput, with_roofs
from mhabench.results.columns import (
    IMPL,
    LATENCY_MS,
)
from mhabench.results.schema import RowStatus
from mhabench.views import summary
from mhabench.views.run_notes import LEGEND, lines_under_table
from mhabench.views.table import TableModel, fit_columns, format_number, to_rich

LATENCY_RANGE = "ms across processes"
SPEEDUP_RANGE = "speedup range"
DROPPABLE = (*summary.DROPPABLE, LATENCY_RANGE)
"""Left out while the terminal is too narrow: the one-process table's droppable columns, then the latency range."""


PER_PROCESS_ROWS = "mhabench report RUN --replicate-rows, or results.csv (repeat = process)"
"""Where a replicated run's rows of each process are, when its pooled table is all that is shown."""


def pooled_note(processes: int, where: str = PER_PROCESS_ROWS) -> str:
    """The sentence under (or above) a pooled table: what its figures are, and ``where`` each process's rows are."""
    return (
        f"One row per case and implementation, pooled over {processes} independent processes: median ms is the "
        "median of the processes' medians (ms across processes: their lowest and highest); the speedup is the "
        "geometric mean of the processes' paired speedups with a 95% t interval across them, which holds the "
        f"between-process spread; speedup range: max/min − 1 of those speedups. Each process's rows: {where}."
    )


def pooled_table(
    speedups: pd.DataFrame,
    baseline: str = DEFAULT_BASELINE,
    title: str = "",
) -> TableModel:
    """The pooled results table of a replicated run's :func:`speedup_rows` (pooled here); a row is styled as
    the pick only where its ``pick`` column says ``winner``."""
    pooled = pooled_rows(with_roofs(speedups))  # every process's probe, not the pooled row's alone
    frame = pd.concat([pooled, throughput(pooled)], axis=1)
    styles = [
        "failed" if r[PROCESSES_OK] == 0 else "winner" if r.get("pick") == "winner" else "" for _, r in frame.iterrows()
    ]
    title = title or f"mhabench run, speedup vs {baseline}, " + pooled_title(speedups)
    return summary.column_table(title, _columns(baseline, frame), frame, styles)


def pooled_title(speedups: pd.DataFrame) -> str:
    """What a pooled table's speedups are, for its title."""
    return (
        f"pooled over {repeat_count(speedups)} processes (geometric mean of the processes' paired speedups, "
        "95% t interval across processes)"
    )


def wide_summary(rows: pd.DataFrame, baseline: str, width: int | None = None) -> list[RenderableType]:
    """``mhabench run --wide`` after a replicated run: the pooled table, every column a ``width`` terminal shows."""
    table = pooled_table(speedup_rows(rows, baseline), baseline)
    shown = fit_columns(table, width, DROPPABLE) if width else table
    notes = [Text(line) for line in lines_under_table(rows)]
    return [to_rich(shown), Text(pooled_note(repeat_count(rows))), Text(LEGEND), *notes]


def _columns(baseline: str, frame: pd.DataFrame) -> list[summary.Column]:
    """The pooled table's columns: header and cell."""
    columns: list[summary.Column] = [
        ("case", lambda r: str(r["case"])),
        ("impl", lambda r: str(r[IMPL])),
        ("processes", lambda r: f"{r[PROCESSES_OK]}/{r[PROCESSES]}"),
        ("median ms", lambda r: format_number(r[LATENCY_MS], ".3f") if r[PROCESSES_OK] else "-"),
        (LATENCY_RANGE, _latency_range),
        (f"speedup vs {baseline}", summary.speedup_text),
        (SPEEDUP_RANGE, lambda r: format_number(r.get(SPEEDUP_PROCESS_RANGE), ".1%")),
        *summary.figure_columns(lambda r: bool(r[PROCESSES_OK]), frame),
    ]
    return [*columns, ("status", _status_text)]


def _latency_range(row: pd.Series) -> str:
    """``min–max`` of the medians of the processes it ran ok in, each to about 3 digits: a range, not a figure."""
    if not row[PROCESSES_OK]:
        return "-"
    return f"{_about(row[LATENCY_PROCESS_MIN_MS])}–{_about(row[LATENCY_PROCESS_MAX_MS])}"


def _about(value_ms: float) -> str:
    """3 significant digits below 100 ms, whole milliseconds above (never an exponent a range cannot be read in)."""
    return f"{value_ms:.0f}" if value_ms >= 100 else f"{value_ms:.3g}"


def _status_text(row: pd.Series) -> str:
    """``ok``; ``ok in 2 of 3 processes``; or, ok in none, the first process's status and error."""
    if not row[PROCESSES_OK]:
        return summary.status_text(row)
    if row[PROCESSES_OK] < row[PROCESSES]:
        return f"{RowStatus.OK.value} in {row[PROCESSES_OK]} of {row[PROCESSES]} processes"
    return RowStatus.OK.value
