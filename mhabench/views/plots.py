"""The report's plots (PNG bytes, on :mod:`mhabench.views.plot_style`): each says why when the data cannot support it.

A sweep is drawn as small multiples (one panel per combination of the fields that vary besides x, one line per
implementation, one legend outside the axes): one line per (implementation × every other field) made a 5-field
sweep ~100 lines under a legend that covered the data. Then the roofline (:mod:`mhabench.views.roofline`) and the
speedups over the baseline as bars with their intervals.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from mhabench.analysis.speedup import DEFAULT_BASELINE
from mhabench.results.columns import CASE_ID, HEADS, IMPL, KV_HEADS, LATENCY_MS, PEAK_MEMORY_BYTES, SCENARIO, SEQ_LEN
from mhabench.views.plot_style import (
    MAX_IMAGES,
    MAX_LINES,
    Plot,
    as_plots,
    constant_label,
    drawn_text,
    fields_present,
    figure_legend,
    impl_handles,
    impl_styles,
    left_out_text,
    ok_rows,
    plain_log_labels,
    shown_impls,
    varying_label,
    with_grid,
)
from mhabench.views.roofline import roofline

MIB = 1024 * 1024
MAX_PANELS = 12  # axes per image; more go to further images
MAX_BAR_CASES = 16  # cases per speedup bar chart image
PANEL_SIZE_IN = (3.2, 2.4)
MIN_FIGURE_WIDTH_IN = 6.4
"""A figure of one or two panels is drawn this wide: at 3.2 inches (320 px) its title is cut and a legend of the
default run's four implementations is wider than the figure."""
BAR_LABEL_CHARS = 36  # a case label wraps at this width beside its bars
PANEL_TITLE_CHARS = 40  # a panel's title wraps at this width (a small-font line of a 3.2-inch panel)

Metric = tuple[str, Callable[[pd.DataFrame], pd.Series]]  # (y label, value of each row)


def facet_panels(rows: pd.DataFrame, x: str) -> tuple[list[str], list[tuple]]:
    """(facet fields, [(panel title, panel rows)]): one panel per combination of the fields that vary.

    A panel is kept when some implementation has two or more ``x`` values in it (a line to draw).
    kv_heads is no facet in plain MHA (kv_heads = heads in every row): it would repeat heads."""
    plain_mha = KV_HEADS in rows and bool((rows[KV_HEADS] == rows[HEADS]).all())
    others = fields_present(rows, exclude=(x, KV_HEADS) if plain_mha else (x,))
    facets = [f for f in others if rows[f].nunique(dropna=False) > 1]
    groups = rows.groupby(facets, sort=True, dropna=False) if facets else [((), rows)]
    panels = []
    for key, group in groups:
        if group.groupby(IMPL)[x].nunique().max() >= 2:
            values = dict(zip(facets, key if isinstance(key, tuple) else (key,), strict=True))
            panels.append((varying_label(rows, values, facets), group))
    return facets, panels


def _draw_panel(axes: Sequence[Axes], panel: pd.DataFrame, x: str, metrics: Sequence[Metric], styles: dict) -> None:
    """One line per implementation and metric; repeats of a point are drawn at their median."""
    for impl, group in panel.groupby(IMPL, sort=False):
        colour, marker = styles[str(impl)]
        for ax, (_, metric) in zip(axes, metrics, strict=True):
            values = pd.Series(metric(group).to_numpy(dtype=float), index=group[x].to_numpy())
            line = values.groupby(level=0).median().sort_index()
            ax.plot(line.index, line.to_numpy(), color=colour, marker=marker, markersize=4, linewidth=1.3)


def _facet_figure(panels: list[tuple], x: str, metrics: Sequence[Metric], styles: dict, columns: int) -> Figure:
    """Panels × metrics in a grid with shared axes; the empty cells of the last row are removed."""
    count = len(panels) * len(metrics)
    nrows = math.ceil(count / columns)
    width_in = max(PANEL_SIZE_IN[0] * columns, MIN_FIGURE_WIDTH_IN)
    fig = Figure(figsize=(width_in, PANEL_SIZE_IN[1] * nrows + 0.9), layout="constrained")
    axes_grid = fig.subplots(nrows, columns, sharex=True, sharey="col" if len(metrics) > 1 else True, squeeze=False)
    cells = list(axes_grid.flat)
    for ax in cells[count:]:
        ax.remove()
    for index, (title, panel) in enumerate(panels):
        axes = cells[index * len(metrics) : (index + 1) * len(metrics)]
        _draw_panel(axes, panel, x, metrics, styles)
        for ax in axes:
            ax.set_title(textwrap.fill(title, PANEL_TITLE_CHARS), fontsize="small")
    ticks = sorted({float(v) for _, panel in panels for v in panel[x]})
    for index, ax in enumerate(map(with_grid, cells[:count])):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain_log_labels(ax)
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ""))
        if index + columns >= count:  # lowest panel of its column: the removed cells below hid its labels
            ax.xaxis.set_tick_params(which="both", labelbottom=True)
            ax.set_xlabel(x)
        if len(metrics) > 1 or index % columns == 0:
            ax.set_ylabel(metrics[index % len(metrics)][0])
    impls = {str(i) for _, panel in panels for i in panel[IMPL]}
    figure_legend(fig, impl_handles([n for n in styles if n in impls], styles))
    return fig


def facet_figures(
    rows: pd.DataFrame, x: str, metrics: Sequence[Metric], styles: dict
) -> tuple[list[Figure], list[str], int]:
    """Small-multiple images of ``metrics`` against ``x`` (none: nothing to draw), the facet fields, the panels."""
    facets, panels = facet_panels(rows, x)
    per_image = MAX_PANELS // len(metrics)
    columns = 2 * len(metrics) if len(metrics) > 1 else min(3, len(panels))
    chunks = [panels[i : i + per_image] for i in range(0, len(panels), per_image)][:MAX_IMAGES]
    return [_facet_figure(chunk, x, metrics, styles, columns) for chunk in chunks], facets, len(panels)


LATENCY: Metric = ("median latency (ms)", lambda g: g[LATENCY_MS])
MEMORY: Metric = ("peak memory (MiB)", lambda g: g[PEAK_MEMORY_BYTES].astype(float) / MIB)
FACETED = {  # name: (title, x, metrics, why it is skipped)
    "latency_vs_seq_len": (
        "Latency vs sequence length (log-log)",
        SEQ_LEN,
        (LATENCY,),
        "needs at least two seq_len values for one implementation",
    ),
    "memory_vs_seq_len": (
        "Peak memory vs sequence length",
        SEQ_LEN,
        (MEMORY,),
        "needs peak memory at two or more seq_len values",
    ),
    "vs_heads": (
        "Latency and peak memory vs heads (fixed d_model)",
        HEADS,
        (LATENCY, MEMORY),
        "heads do not vary at a fixed d_model in this run",
    ),
}


def faceted(name: str, rows: pd.DataFrame, styles: dict, baseline: str = DEFAULT_BASELINE) -> list[Plot]:
    """The images of the :data:`FACETED` plot ``name``, or one skipped Plot saying why."""
    title, x, metrics, reason = FACETED[name]
    ok = ok_rows(rows)
    ok = ok[np.logical_and.reduce([metric(ok).astype(float) > 0 for _, metric in metrics])]
    shown, left_out = shown_impls(ok, baseline)
    figures, facets, panels = facet_figures(ok[ok[IMPL].isin(shown)], x, metrics, styles)
    if not figures:
        return [Plot(name, title, None, reason)]
    drawn = sum(len(fig.axes) for fig in figures) // len(metrics)
    facet_text = f"One panel per {' × '.join(facets)} value; lines: implementations." if facets else ""
    caption = " ".join(
        filter(None, [facet_text, drawn_text(drawn, panels, "panels"), left_out_text(shown, left_out, baseline)])
    )
    return as_plots(name, title, figures, constant_label(ok, (x,)), caption)


def _bar_figure(table: pd.DataFrame, rows: pd.DataFrame, cases: list[str], styles: dict, baseline: str) -> Figure:
    """Horizontal bars, one group per case: the case labels (however long) read on the left at full size,
    the plot keeps its width, and the figure grows with the cases instead of squeezing them."""
    impls = list(dict.fromkeys(table[IMPL]))
    ticks = [textwrap.fill(_case_tick(rows, c), BAR_LABEL_CHARS) for c in cases]
    per_case = max(0.2 * len(impls) + 0.15, 0.17 * max(t.count("\n") + 1 for t in ticks) + 0.1)
    fig = Figure(figsize=(8.0, max(2.8, 1.3 + per_case * len(cases))), layout="constrained")
    ax = with_grid(fig.add_subplot())
    width = 0.8 / len(impls)
    for position, impl in enumerate(impls):
        part = table[table[IMPL] == impl].groupby(CASE_ID)[["speedup", "speedup_ci_low", "speedup_ci_high"]]
        part = part.median().reindex(cases)  # one bar per case even when the rows hold several repeats
        centre = np.arange(len(cases)) + (position - (len(impls) - 1) / 2) * width
        low = (part["speedup"] - part["speedup_ci_low"]).clip(lower=0).fillna(0)
        high = (part["speedup_ci_high"] - part["speedup"]).clip(lower=0).fillna(0)
        ax.barh(
            centre,
            part["speedup"],
            width,
            xerr=[low, high],
            color=styles[impl][0],
            capsize=2,
            error_kw={"linewidth": 0.8},
        )
    ax.axvline(1.0, color="0.3", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    values = pd.concat([table["speedup_ci_low"], table["speedup_ci_high"], table["speedup"]]).dropna()
    values = values[values > 0]
    low, high = min(1.0, float(values.min())) / 1.15, max(1.0, float(values.max())) * 1.15
    ax.set_xlim(low, high)
    marks = speedup_ticks(low, high)
    ax.set_xticks(marks, [f"{mark:g}×" for mark in marks])
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ""))
    ax.set_yticks(np.arange(len(cases)), ticks, fontsize="small")
    ax.invert_yaxis()  # the first case on top, as in the tables
    ax.set_xlabel(f"speedup over {baseline} (log scale; right of the dashed line: faster)")
    handles = [Line2D([], [], color=styles[n][0], linewidth=6, label=n) for n in impls]
    figure_legend(fig, handles, "outside right upper")
    return fig


NICE_MANTISSAS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
"""Speedups a tick may be placed at: dense enough that a narrow range (0.9× to 1.3×) gets several ticks."""
MAX_SPEEDUP_TICKS = 8


def speedup_ticks(low: float, high: float) -> list[float]:
    """Tick values inside [low, high]: 1× always, and up to ``MAX_SPEEDUP_TICKS`` nice values around it, so a
    narrow range is never labelled by "1×" alone and a wide one never crowds."""
    decades = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
    for mantissas in (NICE_MANTISSAS, (1.0, 2.0, 5.0), (1.0,)):
        marks = sorted({round(m * 10**k, 6) for k in decades for m in mantissas if low <= m * 10**k <= high} | {1.0})
        if len(marks) <= MAX_SPEEDUP_TICKS:
            return marks
    step = math.ceil(len(marks) / MAX_SPEEDUP_TICKS)
    return sorted(set(marks[::step]) | {1.0})


def speedup_bars(speedups: pd.DataFrame, styles: dict, baseline: str = DEFAULT_BASELINE) -> list[Plot]:
    """Per case, each implementation's speedup over the baseline, with its bootstrap CI as error bars.

    ``speedups``: the rows with their speedups over ``baseline`` (``speedup_rows``)."""
    title = f"Speedup over {baseline}"
    if baseline not in set(speedups[IMPL]):
        return [Plot("speedup", title, None, f"the run has no {baseline} rows to compare with")]
    shown, left_out = shown_impls(speedups, baseline, MAX_LINES + 1)  # the baseline itself has no bar
    table = speedups[(speedups[IMPL] != baseline) & speedups["speedup"].notna() & speedups[IMPL].isin(shown)]
    if table.empty:
        return [Plot("speedup", title, None, f"no case has both {baseline} and another implementation measured")]
    cases = list(dict.fromkeys(table[CASE_ID]))
    chunks = [cases[i : i + MAX_BAR_CASES] for i in range(0, len(cases), MAX_BAR_CASES)][:MAX_IMAGES]
    figures = [_bar_figure(table, speedups, chunk, styles, baseline) for chunk in chunks]
    caption = " ".join(
        filter(None, [drawn_text(sum(map(len, chunks)), len(cases), "cases"), left_out_text(shown, left_out, baseline)])
    )
    return as_plots("speedup", title, figures, "higher is better; bars: 95% bootstrap CI", caption)


def _case_tick(rows: pd.DataFrame, case_id: str) -> str:
    first, fields = rows[rows[CASE_ID] == case_id].iloc[0], fields_present(rows, exclude=())
    return varying_label(rows, {f: first[f] for f in fields}, fields) or str(first[SCENARIO])


def all_plots(speedups: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> list[Plot]:
    """Every image of a report, in the order they appear, from the run's rows with their speedups over
    ``baseline`` (``speedup_rows``: the report computes them once for its plots and tables)."""
    styles = impl_styles(speedups)
    return [
        *faceted("latency_vs_seq_len", speedups, styles, baseline),
        *faceted("memory_vs_seq_len", speedups, styles, baseline),
        roofline(speedups, styles, baseline),
        *speedup_bars(speedups, styles, baseline),
        *faceted("vs_heads", speedups, styles, baseline),
    ]
