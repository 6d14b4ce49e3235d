"""What every plot of the report shares: figures on an Agg canvas rendered to small PNGs, one style per
implementation, labels from the fields that vary, one legend outside the axes, log axes labelled 1-2-5.

Figures are ``matplotlib.figure.Figure`` on an explicit Agg canvas, never pyplot: no display, no global state.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping, Sequence
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

from mhabench.results.cells import cell
from mhabench.results.columns import (
    BATCH,
    CASE_ID,
    CAUSAL,
    D_MODEL,
    DTYPE,
    HEAD_DIM,
    HEADS,
    IMPL,
    KEY_DEFAULTS,
    KV_HEADS,
    LATENCY_MS,
    LAYOUT,
    MASK,
    MODE,
    PHASE,
    REPEAT,
    SCORE_MOD,
    SEQ_LEN,
    SHAPE_FIELDS,
    SOFTCAP,
    STATUS,
    label,
)
from mhabench.results.schema import RowStatus
from mhabench.views.report.blocks import Plot

__all__ = ["Plot"]

# Fields that make two rows different measurements (besides the implementation).
PLOT_FIELDS = (*SHAPE_FIELDS, DTYPE)
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DPI = 100
MAX_LINES = 8  # implementations per panel; beyond it the baseline and the fastest others are drawn
MAX_IMAGES = 4  # images per plot: the tables hold every case, the plots are a legible overview
TITLE_CHARS_PER_IN = 9  # characters of a medium-size title line per inch of figure width (wide ones included)
INERT = {**{name: value for name, value in KEY_DEFAULTS.items() if name != REPEAT}, MODE: "forward", PHASE: "prefill"}
"""Each pattern and mode field at the value that adds nothing to a label (the run's own default)."""


def one_two_five(value: float, _position: int) -> str:
    """Label 1, 2, 5 × 10^k only, written plainly (200, 0.5): readable like the tables, never crowded."""
    if value <= 0:
        return ""
    mantissa = value / 10 ** math.floor(math.log10(value) + 1e-9)
    return f"{value:g}" if any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5)) else ""


MINOR_LABEL_DECADES = 2.0
"""An axis spanning more decades than this labels its powers of ten only: 2 and 5 × 10^k between them would
run together ("100200", "10002000 5000" on a roofline over four decades)."""


def plain_log_labels(ax: Axes) -> None:
    """1-2-5 labels on both log axes (call after plotting: how much each axis spans decides its minor labels)."""
    for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        axis.set_major_formatter(FuncFormatter(one_two_five))
        wide = low > 0 and math.log10(high / low) > MINOR_LABEL_DECADES
        axis.set_minor_formatter(FuncFormatter(lambda _v, _p: "") if wide else FuncFormatter(one_two_five))


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


def with_grid(ax: Axes) -> Axes:
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    return ax


def figure_legend(fig: Figure, handles: Sequence[Artist], where: str = "outside lower center") -> None:
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


def impl_handles(names: Sequence[str], styles: dict[str, tuple[str, str]]) -> list[Line2D]:
    return [Line2D([], [], color=styles[n][0], marker=styles[n][1], label=n) for n in names]


def as_plots(name: str, title: str, figures: list[Figure], subtitle: str, caption: str) -> list[Plot]:
    """One Plot per image: ``name``, ``name_2``, …; a title says "(2 of 3)" when there are several."""
    plots = []
    for number, fig in enumerate(figures, 1):
        part = f" ({number} of {len(figures)})" if len(figures) > 1 else ""
        wrapped = textwrap.fill(subtitle, width=max(40, int(fig.get_figwidth() * TITLE_CHARS_PER_IN)))
        fig.suptitle(f"{title}{part}\n{wrapped}".strip(), fontsize="medium")
        stem = name if number == 1 else f"{name}_{number}"
        plots.append(Plot(stem, title + part, render(fig), wide=fig.get_figwidth() > 7, caption=caption))
    return plots


def drawn_text(drawn: int, total: int, what: str) -> str:
    return f"The first {drawn} of {total} {what} are drawn (the tables hold every case)." if drawn < total else ""


def left_out_text(shown: Sequence[str], left_out: Sequence[str], baseline: str) -> str:
    """Which implementations a plot leaves out, and which it draws instead."""
    if not left_out:
        return ""
    lead = f"{baseline} and the" if baseline in shown else "The"
    others = len(shown) - (baseline in shown)
    return f"{lead} {others} fastest others of {len(shown) + len(left_out)} are drawn; left out: {', '.join(left_out)}."
