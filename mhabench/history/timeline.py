"""The history as a report: the timeline plot of every series (points with their intervals in commit
order, change points marked), the tables under it, written by the report's own renderers (HTML, Markdown)."""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from mhabench.errors import InputError
from mhabench.history import store
from mhabench.history.series import DEFAULT_METRIC, METRICS, History, Series, build
from mhabench.history.table import changes_table, fingerprints_table, points_table
from mhabench.results.store import Run
from mhabench.views.plot_style import Plot, render
from mhabench.views.report.blocks import Block, Heading, Paragraph, skipped_plot

MAX_PANELS = 24
"""Series drawn at most; the tables list them all."""


def _draw(ax: Axes, series: Series) -> None:
    xs = list(range(len(series.points)))
    values = [point.value for point in series.points]
    below = [point.value - point.low if math.isfinite(point.low) else 0.0 for point in series.points]
    above = [point.high - point.value if math.isfinite(point.high) else 0.0 for point in series.points]
    ax.errorbar(xs, values, yerr=[below, above], fmt="o-", capsize=3, color="C0")
    for step in series.steps:
        index = next(i for i, point in enumerate(series.points) if point.label == step.after)
        ax.axvline(index - 0.5, color="C3", linestyle="--", linewidth=1)
        ax.annotate(f"{step.size:.2f}×", (index - 0.5, max(values)), color="C3", fontsize=8, ha="center")
    ax.set_xticks(xs, [point.label[:7] for point in series.points], rotation=45, ha="right", fontsize=7)
    ax.set_title(series.name, fontsize=8)
    ax.grid(alpha=0.3)


def timeline_plot(history: History) -> Plot:
    """One panel per series, up to ``MAX_PANELS``."""
    shown = history.series[:MAX_PANELS]
    if not shown:
        return Plot("history_timeline", "Timeline", None, reason="no series with points")
    columns = min(len(shown), 2)
    rows = math.ceil(len(shown) / columns)
    fig = Figure(figsize=(6 * columns, 3.2 * rows))
    axes = fig.subplots(rows, columns, squeeze=False)
    for ax, series in zip(axes.flat, shown, strict=False):
        _draw(ax, series)
        ax.set_ylabel(f"{history.metric.name} ({history.metric.unit})", fontsize=8)
    for ax in list(axes.flat)[len(shown) :]:
        ax.set_visible(False)
    fig.tight_layout()
    caption = "points in commit order with 95% intervals; dashed lines: change points"
    if len(history.series) > MAX_PANELS:
        caption += f"; {len(history.series) - MAX_PANELS} more series in the table"
    return Plot("history_timeline", "Timeline", render(fig), wide=True, caption=caption)


def run_blocks(directory: Path, run: Run, threshold: float) -> list[Block]:
    """``report RUN --history DIR``: the timeline of the run's own cases and implementations, after its sections."""
    runs, rows = store.read(directory)
    cases = list(dict.fromkeys(str(row.case.case_id) for row in run.rows if row.case.case_id is not None))
    impls = list(dict.fromkeys(str(row.case.impl) for row in run.rows if row.case.impl is not None))
    try:
        history = build(runs, rows, METRICS[DEFAULT_METRIC], threshold, cases, impls)
    except InputError:  # none of this run's series is in the history: say so, the report is still written
        return [Heading("History", level=2), Paragraph(f"{directory} holds no series of this run's cases.")]
    return blocks(history, level=2)


def _plot_or_reason(plot: Plot) -> Block:
    return plot if plot.png else skipped_plot(plot)


def blocks(history: History, level: int = 1) -> list[Block]:
    """The history report: heading, method, timeline plot, change points, points, fingerprints."""
    return [
        Heading("History", level=level),
        Paragraph(
            f"Metric: {history.metric.name} — {history.metric.description} ({history.metric.unit}). Change points: "
            "L1 piecewise-constant fit with a penalty (asv's step detection) on log values."
        ),
        _plot_or_reason(timeline_plot(history)),
        changes_table(history),
        points_table(history),
        fingerprints_table(history),
    ]
