"""The report's plots (matplotlib, Agg canvas, PNG bytes): each says why when the data cannot support it.

Figures are ``matplotlib.figure.Figure`` on an explicit Agg canvas, never pyplot: no display, no global
state. A sweep is drawn as small multiples (one panel per combination of the fields that vary besides
x, one line per implementation, one legend outside the axes): one line per (implementation × every
other field) made a 5-field sweep ~100 lines under a legend that covered the data.
"""

from __future__ import annotations

import io
import itertools
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter
from PIL import Image

from mhabench.analysis.executed import (
    COUNTED,
    EXECUTED_INTENSITY,
    EXECUTED_TFLOPS,
    HARDWARE,
    SOURCE,
    executed,
    numeric_column,
    source_points,
)
from mhabench.analysis.speedup import DEFAULT_BASELINE
from mhabench.analysis.throughput import with_roofs
from mhabench.results.cells import cell
from mhabench.results.columns import (
    BATCH,
    CASE_ID,
    CAUSAL,
    D_MODEL,
    DTYPE,
    HARDWARE_INTENSITY,
    HEAD_DIM,
    HEADS,
    IMPL,
    KEY_DEFAULTS,
    KV_HEADS,
    LATENCY_MS,
    LAYOUT,
    MASK,
    MODE,
    PEAK_GBPS,
    PEAK_MEMORY_BYTES,
    PEAK_TFLOPS,
    PHASE,
    REPEAT,
    ROOFLINE_SOURCE,
    SCENARIO,
    SCORE_MOD,
    SEQ_LEN,
    SHAPE_FIELDS,
    SKIPS_MASKED_WORK,
    SOFTCAP,
    STATUS,
    label,
)
from mhabench.results.schema import RowStatus
from mhabench.views.report.blocks import Plot

# Fields that make two rows different measurements (besides the implementation).
PLOT_FIELDS = (*SHAPE_FIELDS, DTYPE)
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DPI = 100
MIB = 1024 * 1024
MAX_LINES = 8  # implementations per panel; beyond it the baseline and the fastest others are drawn
MAX_PANELS = 12  # axes per image; more go to further images
MAX_IMAGES = 4  # images per plot: the tables hold every case, the plots are a legible overview
MAX_BAR_CASES = 16  # cases per speedup bar chart image
PANEL_SIZE_IN = (3.2, 2.4)
MIN_FIGURE_WIDTH_IN = 6.4
"""A figure of one or two panels is drawn this wide: at 3.2 inches (320 px) its title is cut and a legend of the
default run's four implementations is wider than the figure."""
BAR_LABEL_CHARS = 36  # a case label wraps at this width beside its bars
PANEL_TITLE_CHARS = 40  # a panel's title wraps at this width (a small-font line of a 3.2-inch panel)
TITLE_CHARS_PER_IN = 9  # characters of a medium-size title line per inch of figure width (wide ones included)
INERT = {**{name: value for name, value in KEY_DEFAULTS.items() if name != REPEAT}, MODE: "forward", PHASE: "prefill"}
"""Each pattern and mode field at the value that adds nothing to a label (the run's own default)."""

Metric = tuple[str, Callable[[pd.DataFrame], pd.Series]]  # (y label, value of each row)


def _one_two_five(value: float, _position: int) -> str:
    """Label 1, 2, 5 × 10^k only, written plainly (200, 0.5): readable like the tables, never crowded."""
    if value <= 0:
        return ""
    mantissa = value / 10 ** math.floor(math.log10(value) + 1e-9)
    return f"{value:g}" if any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5)) else ""


MINOR_LABEL_DECADES = 2.0
"""An axis spanning more decades than this labels its powers of ten only: 2 and 5 × 10^k between them would
run together ("100200", "10002000 5000" on a roofline over four decades)."""


def _plain_log_labels(ax: Axes) -> None:
    """1-2-5 labels on both log axes (call after plotting: how much each axis spans decides its minor labels)."""
    for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        axis.set_major_formatter(FuncFormatter(_one_two_five))
        wide = low > 0 and math.log10(high / low) > MINOR_LABEL_DECADES
        axis.set_minor_formatter(FuncFormatter(lambda _v, _p: "") if wide else FuncFormatter(_one_two_five))


def ok_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with a measured latency: only these can be plotted."""
    return rows[(rows[STATUS] == RowStatus.OK) & rows[LATENCY_MS].notna()].astype({LATENCY_MS: float})


def impl_styles(rows: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """One (colour, marker) per implementation, the same in every plot of a report."""
    names = list(dict.fromkeys(rows[IMPL]))
    return {name: (f"C{i % 10}", MARKERS[i % len(MARKERS)]) for i, name in enumerate(names)}


def shown_impls(rows: pd.DataFrame, baseline: str, limit: int = MAX_LINES) -> tuple[list[str], list[str]]:
    """(drawn, left out): every implementation, or the baseline and the fastest others up to ``limit``.

    "Fastest" is the median over cases of latency / the case's fastest latency, so a shape that only
    some implementations ran does not decide the ranking."""
    names = list(dict.fromkeys(rows[IMPL]))
    ok = ok_rows(rows)
    if len(names) <= limit or ok.empty:
        return names, []
    relative = ok[LATENCY_MS] / ok.groupby(CASE_ID)[LATENCY_MS].transform("min")
    ranked = list(relative.groupby(ok[IMPL]).median().sort_values().index)
    keep = ([baseline] if baseline in ranked else []) + [n for n in ranked if n != baseline]
    return [n for n in names if n in keep[:limit]], [n for n in names if n not in keep[:limit]]


def fields_present(rows: pd.DataFrame, exclude: Sequence[str]) -> list[str]:
    """The plot fields the rows have, less ``exclude`` and a ``head_dim`` that is d_model / heads in every row
    (it then only repeats those two)."""
    follows = HEAD_DIM in rows and bool((rows[HEAD_DIM] * rows[HEADS] == rows[D_MODEL]).all())
    return [f for f in PLOT_FIELDS if f in rows.columns and f not in exclude and not (f == HEAD_DIM and follows)]


def field_text(field: str, value: object) -> str:
    """``n=512``, ``causal`` / ``no causal``, ``float32``: one shape field, short enough for a legend."""
    short = {name: label(name) for name in (BATCH, SEQ_LEN, D_MODEL, HEADS, KV_HEADS, HEAD_DIM)}
    if isinstance(value, bool | np.bool_):
        return field if value else f"no {field}"
    return str(value) if field == DTYPE else f"{short.get(field, field)}={value}"


def says_something(field: str, values: Mapping[str, object]) -> bool:
    """False where the field's value adds nothing to a label: a pattern field at its "none" (``window=0``,
    ``lengths=none``, one rank, a forward prefill), or ``causal`` beside a mask that already says it."""
    value = values[field]
    if cell(value) is None or (field in INERT and value == INERT[field]):
        return False
    implied = {
        CAUSAL: cell(values.get(MASK)) is not None,  # the mask says it
        SCORE_MOD: value == "softcap" and cell(values.get(SOFTCAP)) is not None,  # softcap=50 says it
        KV_HEADS: value == values.get(HEADS),  # plain multi-head attention
        HEAD_DIM: (cell(values.get(HEADS)) is not None)
        and value * values.get(HEADS, 0) == values.get(D_MODEL),  # d / h
    }
    return not implied.get(field, False)


def varying_label(rows: pd.DataFrame, values: dict[str, object], fields: Sequence[str]) -> str:
    """Label a group by the fields that vary across ``rows`` only (the constant ones are in the title). A packed
    batch of documents is one input row: ``b=1``, as the tables say (its documents are in its lengths)."""
    values = {**values, BATCH: 1} if values.get(LAYOUT) == "packed" and BATCH in values else values
    shown = [f for f in fields if rows[f].nunique(dropna=False) > 1 and says_something(f, values)]
    return " ".join(field_text(f, values[f]) for f in shown)


def constant_label(rows: pd.DataFrame, exclude: Sequence[str]) -> str:
    """The shape fields that are the same in every row, for a plot title."""
    first = rows.iloc[0]
    fields = [f for f in fields_present(rows, exclude) if rows[f].nunique(dropna=False) == 1]
    shown = [f for f in fields if says_something(f, first) and first[f] is not False and first[f] is not np.False_]
    return " ".join(field_text(f, first[f]) for f in shown)


def render(fig: Figure) -> bytes:
    """PNG bytes in a 256-colour palette: a quarter of the RGBA size, the same picture (the HTML embeds them)."""
    buffer = io.BytesIO()
    FigureCanvasAgg(fig)
    fig.savefig(buffer, format="png", dpi=DPI)
    small = io.BytesIO()
    Image.open(buffer).convert("RGB").quantize(256).save(small, format="png", optimize=True)
    return small.getvalue()


def _grid(ax: Axes) -> Axes:
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    return ax


def _legend(fig: Figure, handles: Sequence[Artist], where: str = "outside lower center") -> None:
    """One legend for the whole figure, outside every axes, so it can never cover data; beside the axes in one
    column, or below them in as many columns as the figure's width holds (every label and marker whole)."""
    if "right" in where:
        fig.legend(handles=handles, loc=where, ncols=1, fontsize="small", frameon=False)
        return
    fitted_legend(fig, handles, where, frameon=False)


def fitted_legend(fig: Figure, handles: Sequence[Artist], where: str, max_columns: int = 4, **options: Any) -> None:
    """A figure legend at ``where`` in the most columns (up to ``max_columns``) whose width fits the figure: a
    legend wider than its figure loses its first marker and its last label's end to the image's edges."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    for columns in range(min(max_columns, len(handles)), 0, -1):
        legend = fig.legend(handles=handles, loc=where, ncols=columns, fontsize="small", **options)
        if columns == 1 or legend.get_window_extent(renderer).width <= fig.bbox.width:
            return
        legend.remove()


def _impl_handles(names: Sequence[str], styles: dict[str, tuple[str, str]]) -> list[Line2D]:
    return [Line2D([], [], color=styles[n][0], marker=styles[n][1], label=n) for n in names]


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
    grid = fig.subplots(nrows, columns, sharex=True, sharey="col" if len(metrics) > 1 else True, squeeze=False)
    cells = list(grid.flat)
    for ax in cells[count:]:
        ax.remove()
    for index, (title, panel) in enumerate(panels):
        axes = cells[index * len(metrics) : (index + 1) * len(metrics)]
        _draw_panel(axes, panel, x, metrics, styles)
        for ax in axes:
            ax.set_title(textwrap.fill(title, PANEL_TITLE_CHARS), fontsize="small")
    ticks = sorted({float(v) for _, panel in panels for v in panel[x]})
    for index, ax in enumerate(map(_grid, cells[:count])):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_log_labels(ax)
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ""))
        if index + columns >= count:  # lowest panel of its column: the removed cells below hid its labels
            ax.xaxis.set_tick_params(which="both", labelbottom=True)
            ax.set_xlabel(x)
        if len(metrics) > 1 or index % columns == 0:
            ax.set_ylabel(metrics[index % len(metrics)][0])
    impls = {str(i) for _, panel in panels for i in panel[IMPL]}
    _legend(fig, _impl_handles([n for n in styles if n in impls], styles))
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


def _images(name: str, title: str, figures: list[Figure], subtitle: str, caption: str) -> list[Plot]:
    """One Plot per image: ``name``, ``name_2``, …; a title says "(2 of 3)" when there are several."""
    plots = []
    for number, fig in enumerate(figures, 1):
        part = f" ({number} of {len(figures)})" if len(figures) > 1 else ""
        wrapped = textwrap.fill(subtitle, width=max(40, int(fig.get_figwidth() * TITLE_CHARS_PER_IN)))
        fig.suptitle(f"{title}{part}\n{wrapped}".strip(), fontsize="medium")
        stem = name if number == 1 else f"{name}_{number}"
        plots.append(Plot(stem, title + part, render(fig), wide=fig.get_figwidth() > 7, caption=caption))
    return plots


def _drawn_text(drawn: int, total: int, what: str) -> str:
    return f"The first {drawn} of {total} {what} are drawn (the tables hold every case)." if drawn < total else ""


def left_out_text(shown: Sequence[str], left_out: Sequence[str], baseline: str) -> str:
    """Which implementations a plot leaves out, and which it draws instead."""
    if not left_out:
        return ""
    lead = f"{baseline} and the" if baseline in shown else "The"
    others = len(shown) - (baseline in shown)
    return f"{lead} {others} fastest others of {len(shown) + len(left_out)} are drawn; left out: {', '.join(left_out)}."


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
        filter(None, [facet_text, _drawn_text(drawn, panels, "panels"), left_out_text(shown, left_out, baseline)])
    )
    return _images(name, title, figures, constant_label(ok, (x,)), caption)


# --- roofline and speedup ----------------------------------------------------------------------


def roofline_points(rows: pd.DataFrame) -> pd.DataFrame:
    """What the roofline draws, one point per ok row (the rows' index): executed FLOPs per byte and per second.

    Executed, not ``achieved_tflops``: a kernel that skips the blocks a causal mask hides is placed by its useful
    FLOPs, or a causal flash row would stand above the compute roof (:mod:`mhabench.analysis.executed`). FLOPs and
    bytes come from the hardware counters where ``intensity_source`` is hardware (``source``: hardware), are
    counted where it is measured (``source``: measured), else modelled."""
    ok = with_roofs(ok_rows(rows))  # the roofs the tables judge by: never below a row's work
    done = executed(ok)
    points = pd.DataFrame(
        {
            IMPL: ok[IMPL].astype(str),
            DTYPE: ok[DTYPE].astype(str),
            EXECUTED_INTENSITY: done[EXECUTED_INTENSITY],
            EXECUTED_TFLOPS: done[EXECUTED_TFLOPS],
            "source": np.where(done[HARDWARE], "hardware", np.where(done[COUNTED], "measured", "modelled")),
            SKIPS_MASKED_WORK: done[SKIPS_MASKED_WORK],
            PEAK_TFLOPS: numeric_column(ok, PEAK_TFLOPS),
            PEAK_GBPS: numeric_column(ok, PEAK_GBPS),
        }
    )
    values = points[[EXECUTED_INTENSITY, EXECUTED_TFLOPS, PEAK_TFLOPS, PEAK_GBPS]]
    return points[(values > 0).all(axis=1)]


def roof_tflops(peak_tflops: float, peak_gbps: float, intensity: np.ndarray) -> np.ndarray:
    """The roof at ``intensity`` FLOP/byte: the lower of the compute peak and the bandwidth's FLOP/s there."""
    return np.minimum(peak_tflops, peak_gbps * intensity / 1e3)


def _roofs(points: pd.DataFrame) -> pd.DataFrame:
    """One roof per (dtype, peaks), named by its dtype; where a dtype has two (``fused_fp8`` computes in fp8 inside
    a bf16 case, on the fp8 tensor rate), each is also named by the implementations placed on it."""
    roofs = points.groupby([DTYPE, PEAK_TFLOPS, PEAK_GBPS], sort=False)[IMPL].unique().reset_index()
    shared = roofs[DTYPE].duplicated(keep=False)
    roofs["name"] = [
        f"{dtype} ({', '.join(impls)})" if split else dtype
        for dtype, impls, split in zip(roofs[DTYPE], roofs[IMPL], shared, strict=True)
    ]
    return roofs


def roofline_figure(rows: pd.DataFrame, styles: dict) -> Figure | None:
    """Executed TFLOP/s against executed FLOP/byte under the roofs; filled markers: counted, hollow: modelled."""
    points = roofline_points(rows)
    if points.empty:
        return None
    fig = Figure(figsize=(7.0, 4.4), layout="constrained")
    ax = _grid(fig.add_subplot())
    roofs = _roofs(points)
    ridges = roofs[PEAK_TFLOPS] * 1e3 / roofs[PEAK_GBPS]
    intensity = points[EXECUTED_INTENSITY]
    span = (min(intensity.min(), ridges.min()) / 4, max(intensity.max(), ridges.max()) * 4)
    x = np.geomspace(*span, 200)
    handles = []
    for (_, roof), style in zip(roofs.iterrows(), itertools.cycle(LINE_STYLES), strict=False):
        text = f"roof {roof['name']}: {roof[PEAK_GBPS]:.3g} GB/s, {roof[PEAK_TFLOPS]:.3g} TFLOP/s"
        attainable = roof_tflops(roof[PEAK_TFLOPS], roof[PEAK_GBPS], x)
        handles += ax.plot(x, attainable, color="0.25", linestyle=style, linewidth=1.6, label=text)
    _other_sources(ax, rows, points, styles)
    for (impl, source), group in points.groupby([IMPL, "source"], sort=False):
        colour, marker = styles[impl]
        face = colour if source in ("measured", "hardware") else "none"
        ax.scatter(
            group[EXECUTED_INTENSITY],
            group[EXECUTED_TFLOPS],
            marker=marker,
            s=40,
            zorder=3,
            facecolors=face,
            edgecolors=colour,
            linewidths=1.2,
        )
    handles += _impl_handles([n for n in styles if n in set(points[IMPL])], styles)
    for source, fill, text in (
        ("hardware", "0.3", "hardware counters (ncu)"),
        ("measured", "0.3", "counted intensity"),
        ("modelled", "none", "modelled intensity"),
    ):
        if (points["source"] == source).any():
            handles.append(Line2D([], [], linestyle="", marker="o", color="0.3", markerfacecolor=fill, label=text))
    if _has_hardware(rows):
        handles.append(Line2D([], [], color="0.6", linewidth=0.8, marker=".", label="same row: model, counted, hw"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_labels(ax)
    ax.set_xlabel("arithmetic intensity of the executed FLOPs (FLOP/byte)")
    ax.set_ylabel("executed TFLOP/s")
    sources = ", ".join(sorted({str(s) for s in rows.get(ROOFLINE_SOURCE, pd.Series(["?"])).dropna()}))
    ax.set_title(f"Roofline (device peaks: {sources})", fontsize="medium")
    _legend(fig, handles, "outside right upper")
    return fig


def _has_hardware(rows: pd.DataFrame) -> bool:
    return bool((numeric_column(ok_rows(rows), HARDWARE_INTENSITY) > 0).any())


def _other_sources(ax: Axes, rows: pd.DataFrame, points: pd.DataFrame, styles: dict) -> None:
    """Where a row has hardware counters: its model, counted and hardware points, small and joined by a thin
    line, so how far the counted and modelled intensity sit from what the DRAM saw is visible at a glance."""
    if not _has_hardware(rows):
        return
    every = source_points(ok_rows(rows))
    every = every[every["row"].isin(points.index)]
    for row_index, group in every.groupby("row", sort=False):
        colour, marker = styles[str(rows.loc[row_index, IMPL])]
        order = group.set_index(SOURCE).reindex(["model", "counted", "hardware"]).dropna()
        ax.plot(order[EXECUTED_INTENSITY], order[EXECUTED_TFLOPS], color=colour, linewidth=0.6, alpha=0.5, zorder=2)
        ax.scatter(order[EXECUTED_INTENSITY], order[EXECUTED_TFLOPS], marker=marker, s=12, color=colour, alpha=0.5)


def roofline(rows: pd.DataFrame, styles: dict, baseline: str = DEFAULT_BASELINE) -> Plot:
    """The roofline image; its caption says which points are placed by useful FLOPs, and why."""
    shown, left_out = shown_impls(rows, baseline)
    drawn = rows[rows[IMPL].isin(shown)]
    fig = roofline_figure(drawn, styles)
    if fig is None:
        return Plot("roofline", "Roofline", None, "no row has intensity, executed FLOP/s and device peaks")
    skipping = int(roofline_points(drawn)[SKIPS_MASKED_WORK].sum())
    useful = (
        f"{skipping} point(s) of kernels that skip the blocks a causal mask hides are placed by their useful FLOPs "
        "(masked pairs not counted): the FLOPs they execute."
        if skipping
        else ""
    )
    hardware = (
        "Filled: intensity from the hardware counters (ncu) or counted from the ops; hollow: the model's. Small "
        "joined points: the same row by its model, its counted ops and its hardware counters."
        if _has_hardware(drawn)
        else "Filled: intensity counted from the ops; hollow: the model's."
    )
    parts = [
        hardware,
        useful,
        left_out_text(shown, left_out, baseline),
    ]
    return Plot("roofline", "Roofline", render(fig), caption=" ".join(part for part in parts if part))


def _bar_figure(table: pd.DataFrame, rows: pd.DataFrame, cases: list[str], styles: dict, baseline: str) -> Figure:
    """Horizontal bars, one group per case: the case labels (however long) read on the left at full size,
    the plot keeps its width, and the figure grows with the cases instead of squeezing them."""
    impls = list(dict.fromkeys(table[IMPL]))
    ticks = [textwrap.fill(_case_tick(rows, c), BAR_LABEL_CHARS) for c in cases]
    per_case = max(0.2 * len(impls) + 0.15, 0.17 * max(t.count("\n") + 1 for t in ticks) + 0.1)
    fig = Figure(figsize=(8.0, max(2.8, 1.3 + per_case * len(cases))), layout="constrained")
    ax = _grid(fig.add_subplot())
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
    _legend(fig, handles, "outside right upper")
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
        filter(
            None, [_drawn_text(sum(map(len, chunks)), len(cases), "cases"), left_out_text(shown, left_out, baseline)]
        )
    )
    return _images("speedup", title, figures, "higher is better; bars: 95% bootstrap CI", caption)


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
