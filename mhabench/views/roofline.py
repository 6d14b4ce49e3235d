"""The report's roofline: every ok row by its executed FLOP/byte and TFLOP/s, under the roofs of its device.

Executed, not achieved: a kernel that skips the blocks a causal mask hides is placed by its useful FLOPs
(:mod:`mhabench.analysis.executed`); the roofs are the ones the tables judge by (never below a row's work).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from mhabench.analysis.executed import (
    COUNTED,
    EXECUTED_INTENSITY,
    EXECUTED_TFLOPS,
    HARDWARE,
    SOURCE,
    SOURCES,
    executed,
    numeric_column,
    source_points,
)
from mhabench.analysis.speedup import DEFAULT_BASELINE
from mhabench.analysis.throughput import with_roofs
from mhabench.results.columns import (
    DTYPE,
    HARDWARE_INTENSITY,
    IMPL,
    PEAK_GBPS,
    PEAK_TFLOPS,
    ROOFLINE_SOURCE,
    SKIPS_MASKED_WORK,
)
from mhabench.views.plot_style import (
    LINE_STYLES,
    Plot,
    figure_legend,
    impl_handles,
    left_out_text,
    ok_rows,
    plain_log_labels,
    render,
    shown_impls,
    with_grid,
)


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
    ax = with_grid(fig.add_subplot())
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
    handles += impl_handles([n for n in styles if n in set(points[IMPL])], styles)
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
    plain_log_labels(ax)
    ax.set_xlabel("arithmetic intensity of the executed FLOPs (FLOP/byte)")
    ax.set_ylabel("executed TFLOP/s")
    sources = ", ".join(sorted({str(s) for s in rows.get(ROOFLINE_SOURCE, pd.Series(["?"])).dropna()}))
    ax.set_title(f"Roofline (device peaks: {sources})", fontsize="medium")
    figure_legend(fig, handles, "outside right upper")
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
        order = group.set_index(SOURCE).reindex(list(SOURCES)).dropna()
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
