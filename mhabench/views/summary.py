"""What the terminal shows of a run: the run summary, the results table and the dry-run plan.

:func:`run_summary` is what ``mhabench run`` prints: a case per row, an implementation per column, read from the
run's answer (:mod:`mhabench.views.answer_table`). :func:`results_table` is the long table, every row and every
column: ``run --wide`` prints it, the report renders it per scenario to Markdown and HTML. Speedups come from
:mod:`mhabench.analysis.speedup`.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd
from rich.console import RenderableType
from rich.text import Text

from mhabench.analysis.answer import RunAnswer
from mhabench.analysis.case_label import case_label
from mhabench.analysis.estimate import MEDIANS, PAIRED
from mhabench.analysis.speedup import DEFAULT_BASELINE, speedup_rows
from mhabench.analysis.spread import repeat_count, spread_of
from mhabench.analysis.throughput import (
    EXECUTED_OVER_USEFUL,
    USEFUL_EFFICIENCY,
    USEFUL_INTENSITY,
    USEFUL_TFLOPS,
    throughput,
)
from mhabench.results.cells import flag, whole_of
from mhabench.results.columns import (
    ARITHMETIC_INTENSITY,
    BYTES_MOVED,
    CAPPED,
    CASE_ID,
    COMPILE_TIME_S,
    ERROR,
    FLOPS,
    IMPL,
    LATENCY_MS,
    LATENCY_P25_MS,
    LATENCY_P75_MS,
    MAX_REL_ERR,
    NOISY,
    PEAK_MEMORY_BYTES,
    PREDICTED_PEAK_BYTES,
    REPEAT,
    SAMPLE_COUNT,
    STATUS,
    label,
    noisy,
)
from mhabench.results.schema import MIN_SPREAD_SAMPLES, RowStatus
from mhabench.results.store import CSV_NAME
from mhabench.views.answer_table import LEGEND as ANSWER_LEGEND
from mhabench.views.answer_table import answer_tables
from mhabench.views.run_notes import LEGEND, lines_under_table
from mhabench.views.table import LABELS as THROUGHPUT_LABELS
from mhabench.views.table import (
    TABLE_FORMATS,
    TableModel,
    fit_columns,
    format_number,
    human_bytes,
    human_count,
    to_rich,
)

STATUSES = tuple(status for status in RowStatus if status is not RowStatus.PLANNED)
"""Every row status, in the order the summary counts them."""


def speedup_text(row: pd.Series) -> str:
    """``1.23× [1.20–1.26]``: the speedup over the baseline and its 95% bootstrap interval; ``[n/a]`` where
    too few samples leave it undefined (not an empty space a reader could take for "no doubt")."""
    value = row.get("speedup")
    if value is None or not math.isfinite(float(value)):
        return "-"
    low, high = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    interval = f"[{low:.2f}–{high:.2f}]" if low is not None and math.isfinite(float(low)) else "[n/a]"
    return f"{float(value):.2f}× {interval}"


def method_phrase(methods: Iterable[str]) -> str:
    """What a table's speedups are, for its title (a run older than interleaved timing has no rounds)."""
    found = {str(method) for method in methods if method}
    if found == {MEDIANS}:
        return "ratio of medians"
    if found <= {PAIRED}:
        return "median of per-round ratios"
    return "median of per-round ratios, ratio of medians where rounds do not align"


def status_text(row: pd.Series) -> str:
    """``ok``, ``ok (noisy)``, ``ok (capped, 1 sample)``, or the status and its one-line error."""
    if row[STATUS] != RowStatus.OK:
        return f"{row[STATUS]}: {row.get(ERROR) or ''}"
    notes = sample_notes(row)
    return f"ok ({', '.join(notes)})" if notes else "ok"


def sample_notes(row: pd.Series) -> list[str]:
    """What an ok row's samples say of it: ``capped`` (its ``max_run_time_s`` ran out first); ``3 samples``
    below ``MIN_SPREAD_SAMPLES`` (no IQR, so no noisy flag either way), else ``noisy`` when flagged."""
    notes = ["capped"] if flag(row.get(CAPPED)) else []
    count = whole_of(row.get(SAMPLE_COUNT))
    if count is not None and count < MIN_SPREAD_SAMPLES:
        notes.append(f"{count} sample" if count == 1 else f"{count} samples")
    elif noisy(row):
        notes.append("noisy")
    return notes


def _latency_text(row: pd.Series) -> str:
    """``median (IQR)``; the IQR is ``n/a`` below ``MIN_SPREAD_SAMPLES`` samples (one sample's would read 0)."""
    if row[STATUS] != RowStatus.OK:
        return "-"
    count = whole_of(row.get(SAMPLE_COUNT))
    iqr = float(row[LATENCY_P75_MS]) - float(row[LATENCY_P25_MS])
    spread = "n/a" if count is not None and count < MIN_SPREAD_SAMPLES else format_number(iqr, ".3f")
    return f"{format_number(row[LATENCY_MS], '.3f')} ({spread})"


Column = tuple[str, Callable[[pd.Series], str]]
"""A results table's column: its header and how a row's cell is written."""


def figure_columns(measured: Callable[[pd.Series], bool], frame: pd.DataFrame) -> list[Column]:
    """The columns every results table ends with, one-process or pooled: peak memory (where ``measured(row)``),
    modelled bytes, the throughput figures, the error against the reference and, when any row compiled, its time."""
    columns: list[Column] = [
        (label(PEAK_MEMORY_BYTES), lambda r: human_bytes(r.get(PEAK_MEMORY_BYTES)) if measured(r) else "-"),
        (label(BYTES_MOVED), lambda r: human_bytes(r.get(BYTES_MOVED))),
        *(
            (THROUGHPUT_LABELS[name], lambda r, name=name: format_number(r.get(name), TABLE_FORMATS[name]))
            for name in (USEFUL_INTENSITY, USEFUL_TFLOPS, EXECUTED_OVER_USEFUL, USEFUL_EFFICIENCY)
        ),
        (label(MAX_REL_ERR), lambda r: format_number(r.get(MAX_REL_ERR), ".1e")),
    ]
    with_compile = COMPILE_TIME_S in frame and bool(frame[COMPILE_TIME_S].notna().any())
    return columns + ([("compile s", lambda r: format_number(r.get(COMPILE_TIME_S), ".1f"))] if with_compile else [])


def _columns(baseline: str, frame: pd.DataFrame, with_repeats: bool) -> list[Column]:
    """The results table's columns: header and cell. ``rep`` and the spread only for ``--repeat N``."""
    columns: list[Column] = [("case", case_label), ("impl", lambda r: str(r[IMPL]))]
    columns += [(label(REPEAT), lambda r: str(r[REPEAT]))] if with_repeats else []
    columns += [("median ms (IQR)", _latency_text), (f"speedup vs {baseline}", speedup_text)]
    columns += [("speedup spread", lambda r: format_number(r["speedup_spread"], ".1%"))] if with_repeats else []
    columns += figure_columns(lambda r: r[STATUS] == RowStatus.OK, frame)
    return [*columns, ("status", status_text)]


def _with_spread(frame: pd.DataFrame) -> pd.DataFrame:
    """Each row with its (case, impl)'s run-to-run speedup spread over the repeats."""
    spread = spread_of(frame).set_index([CASE_ID, IMPL])["speedup_spread"].to_dict()
    keys = zip(frame[CASE_ID], frame[IMPL], strict=True)
    return frame.assign(speedup_spread=[spread.get(key, math.nan) for key in keys])


def results_table(
    speedups: pd.DataFrame,
    baseline: str = DEFAULT_BASELINE,
    title: str = "",
) -> TableModel:
    """Per (case, implementation): median latency (IQR), speedup over ``baseline`` with CI, memory, cost.

    Throughput and efficiency are the useful work's (:mod:`mhabench.analysis.throughput`): useful FLOPs over the
    time, against the roof at the model's minimal traffic, with the FLOPs executed over the useful ones beside
    them, so work an implementation wasted never reads as efficiency.

    ``speedups`` are the rows with their speedups over ``baseline`` (:func:`speedup_rows`), made by the
    caller: a report cuts one set into its per-scenario tables rather than bootstrapping each again.
    A "compile s" column appears when an implementation compiled on its first call; a ``--repeat N``
    run shows each row's repeat and the (case, implementation)'s speedup spread over the repeats. A row is styled
    as the pick only where its ``pick`` column (:meth:`RunAnswer.with_picks`) says ``winner``.
    """
    with_repeats = repeat_count(speedups) > 1
    frame = _with_spread(speedups) if with_repeats else speedups
    frame = pd.concat([frame, throughput(frame)], axis=1)
    styles = [
        "failed"
        if r[STATUS] != RowStatus.OK
        else "winner"
        if r.get("pick") == "winner"
        else "noisy"
        if flag(r.get(NOISY))
        else ""
        for _, r in frame.iterrows()
    ]
    methods = frame.get("speedup_method", pd.Series(dtype=str))
    title = title or f"mhabench run (speedup vs {baseline}: {method_phrase(methods)}, 95% bootstrap CI)"
    return column_table(title, _columns(baseline, frame, with_repeats), frame, styles)


def column_table(title: str, columns: list[Column], frame: pd.DataFrame, styles: list[str]) -> TableModel:
    """One row per record of ``frame``, each cell written by its column; all but case, impl and status numeric."""
    headers = [header for header, _ in columns]
    cells = [[cell(row) for _, cell in columns] for _, row in frame.iterrows()]
    numeric = [h not in ("case", "impl", "status") for h in headers]
    return TableModel(title, headers, cells, numeric, styles, list(frame.get(CASE_ID, [])), frame)


# --- the compact summary of a large run ----------------------------------------------------------


def status_counts(statuses: Iterable[str]) -> dict[str, int]:
    """Rows per status, in ``STATUSES`` order (see :func:`ordered_counts`)."""
    return ordered_counts(collections.Counter(str(status) for status in statuses))


def ordered_counts(counts: dict[str, int]) -> dict[str, int]:
    """The known statuses in ``STATUSES`` order, then any other; zero counts left out."""
    order = [*STATUSES, *sorted(set(counts) - set(STATUSES))]
    return {status: int(counts[status]) for status in order if counts.get(status)}


# Left out of the run summary, in this order, while the terminal is too narrow for it.
DROPPABLE = (
    label(BYTES_MOVED),
    THROUGHPUT_LABELS[EXECUTED_OVER_USEFUL],
    THROUGHPUT_LABELS[USEFUL_TFLOPS],
    label(MAX_REL_ERR),
    THROUGHPUT_LABELS[USEFUL_INTENSITY],
    label(PEAK_MEMORY_BYTES),
)


def wide_summary(rows: pd.DataFrame, baseline: str, width: int | None = None) -> list[RenderableType]:
    """``mhabench run --wide``: every row with every column (those a ``width`` terminal cannot show left out)."""
    table = results_table(speedup_rows(rows, baseline), baseline)
    notes = [Text(line) for line in lines_under_table(rows)]
    return [to_rich(fit_columns(table, width, DROPPABLE) if width else table), Text(LEGEND), *notes]


def run_summary(record: RunAnswer, rows: pd.DataFrame, run_dir: Path, width: int | None = None) -> list[RenderableType]:
    """What ``mhabench run`` prints at the end: per case group one row per case and one column per implementation
    (:mod:`mhabench.views.answer_table`), the rows that did not run ok, the lines under the table, where every row
    is."""
    tables = [to_rich(table) for table in answer_tables(record, width)]
    counts = status_counts(rows[STATUS])
    not_ok = ", ".join(f"{status} {count}" for status, count in counts.items() if status != RowStatus.OK)
    return [
        *tables,
        Text(ANSWER_LEGEND.format(baseline=record.baseline)),
        *([Text(f"rows not ok: {not_ok}")] if not_ok else []),
        *(Text(line) for line in lines_under_table(rows)),
        Text(f"every row: {run_dir / CSV_NAME} (mhabench run --wide, mhabench report {run_dir})"),
    ]


def plan_table(rows: pd.DataFrame) -> TableModel:
    """``--dry-run``: the cases and their modelled cost, nothing run."""
    headers = ["case", "impl", "FLOPs", "bytes moved", "FLOP/B", "predicted peak mem"]
    cells = [
        [
            str(r[CASE_ID]),
            str(r[IMPL]),
            human_count(r[FLOPS]),
            human_bytes(r[BYTES_MOVED]),
            format_number(r[ARITHMETIC_INTENSITY], ".1f"),
            human_bytes(r[PREDICTED_PEAK_BYTES]),
        ]
        for _, r in rows.iterrows()
    ]
    title = "mhabench run --dry-run (modelled, nothing measured)"
    return TableModel(title, headers, cells, [False, False, True, True, True, True], records=rows)
