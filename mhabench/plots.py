"""The report's plots (matplotlib, Agg canvas, PNG bytes): each says why when the data cannot support it.

Figures are built with ``matplotlib.figure.Figure`` on an explicit Agg canvas, never through
pyplot, so rendering needs no display, keeps no global state and works in a headless CI.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from mhabench.schema import SHAPE_FIELDS, label
from mhabench.speedup import DEFAULT_BASELINE, speedup_rows

# Fields that make two rows different measurements (besides the implementation).
PLOT_FIELDS = (*SHAPE_FIELDS, "dtype")
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DPI = 110
MIB = 1024 * 1024


def _one_two_five(value: float, _position: int) -> str:
    """Label 1, 2, 5 × 10^k only, written plainly (200, 0.5): readable like the tables, never crowded."""
    if value <= 0:
        return ""
    mantissa = value / 10 ** math.floor(math.log10(value) + 1e-9)
    return f"{value:g}" if any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5)) else ""


def _plain_log_labels(ax: Axes) -> None:
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(_one_two_five))
        axis.set_minor_formatter(FuncFormatter(_one_two_five))


def _titled(fig: Figure, title: str, constants: str) -> None:
    fig.suptitle(f"{title}\n{constants}" if constants else title, fontsize="medium")


@dataclasses.dataclass(frozen=True)
class Plot:
    """One plot of the report: PNG bytes, or the reason it was skipped."""

    name: str  # file stem, e.g. latency_vs_seq_len
    title: str
    png: bytes | None
    reason: str = ""
    wide: bool = False  # two panels side by side: laid out across the full page width


def ok_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with a measured latency: only these can be plotted."""
    ok = rows[(rows["status"] == "ok") & rows["latency_ms"].notna()]
    return ok.astype({"latency_ms": float})


def impl_styles(rows: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """One (colour, marker) per implementation, the same in every plot of a report."""
    names = list(dict.fromkeys(rows["impl"]))
    return {name: (f"C{i % 10}", MARKERS[i % len(MARKERS)]) for i, name in enumerate(names)}


def fields_present(rows: pd.DataFrame, exclude: Sequence[str]) -> list[str]:
    return [f for f in PLOT_FIELDS if f in rows.columns and f not in exclude]


def field_text(field: str, value: object) -> str:
    """``n=512``, ``causal`` / ``no causal``, ``float32``: one shape field, short enough for a legend."""
    short = {name: label(name) for name in ("batch", "seq_len", "d_model", "heads", "kv_heads")}
    if isinstance(value, bool | np.bool_):
        return field if value else f"no {field}"
    return str(value) if field == "dtype" else f"{short.get(field, field)}={value}"


def _known(value: object) -> bool:
    """False for the NaN/None a field has in rows written before that field existed."""
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value is not pd.NA


def varying_label(rows: pd.DataFrame, values: dict[str, object], fields: Sequence[str]) -> str:
    """Label a group by the fields that vary across ``rows`` only (the constant ones are in the title)."""
    shown = [f for f in fields if rows[f].nunique(dropna=False) > 1 and _known(values[f])]
    return " ".join(field_text(f, values[f]) for f in shown)


def constant_label(rows: pd.DataFrame, exclude: Sequence[str]) -> str:
    """The shape fields that are the same in every row, for a plot title."""
    first = rows.iloc[0]
    fields = [f for f in fields_present(rows, exclude) if rows[f].nunique(dropna=False) == 1]
    shown = [f for f in fields if _known(first[f]) and first[f] is not False and first[f] is not np.False_]
    return " ".join(field_text(f, first[f]) for f in shown)


def render(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(fig)
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _figure(width_in: float = 6.4, height_in: float = 4.2, columns: int = 1) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    axes = [fig.add_subplot(1, columns, i + 1) for i in range(columns)]
    for ax in axes:
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
    return fig, axes


def _series_plot(
    rows: pd.DataFrame, x: str, metrics: Sequence[tuple[str, str, Callable[[pd.Series], pd.Series]]],
    styles: dict[str, tuple[str, str]], follows_x: Sequence[str] = (),
) -> Figure | None:  # fmt: skip
    """Lines of ``metrics`` against ``x``: colour per impl, line style per group of the other shape fields.

    ``follows_x``: fields that change with ``x`` by construction (kv_heads = heads in plain MHA)."""
    others = fields_present(rows, exclude=(x, *follows_x))
    groups = [(key, g) for key, g in rows.groupby(["impl", *others], sort=False, dropna=False) if g[x].nunique() >= 2]
    if not groups:
        return None
    fig, axes = _figure(6.4 * len(metrics) if len(metrics) > 1 else 6.4, 4.2, columns=len(metrics))
    group_styles: dict[str, str] = {}
    for (impl, *values), group in groups:
        label = varying_label(rows, dict(zip(others, values, strict=True)), others)
        linestyle = group_styles.setdefault(label, LINE_STYLES[len(group_styles) % len(LINE_STYLES)])
        colour, marker = styles[str(impl)]
        group = group.sort_values(x)
        for ax, (_, _, metric) in zip(axes, metrics, strict=True):
            ax.plot(group[x], metric(group), color=colour, marker=marker, linestyle=linestyle,
                    label=f"{impl} {label}".strip())  # fmt: skip
    for ax, (_, ylabel, _) in zip(axes, metrics, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        _plain_log_labels(ax)
        ticks = sorted({v for _, g in groups for v in g[x]})
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ""))
    axes[0].legend(fontsize="small")
    return fig


def _vs_seq_len(
    name: str, title: str, rows: pd.DataFrame, ylabel: str, metric: Callable[[pd.Series], pd.Series],
    styles: dict[str, tuple[str, str]], reason: str,
) -> Plot:  # fmt: skip
    """One metric against seq_len (log-log); ``reason`` says why the plot is skipped when it cannot be drawn."""
    fig = _series_plot(rows, "seq_len", [(name, ylabel, metric)], styles)
    if fig is None:
        return Plot(name, title, None, reason)
    _titled(fig, title, constant_label(rows, ("seq_len",)))
    return Plot(name, title, render(fig))


def latency_vs_seq_len(rows: pd.DataFrame, styles: dict[str, tuple[str, str]]) -> Plot:
    return _vs_seq_len(
        "latency_vs_seq_len", "Latency vs sequence length (log-log)", ok_rows(rows), "median latency (ms)",
        lambda g: g["latency_ms"], styles, "needs at least two seq_len values for one implementation",
    )  # fmt: skip


def memory_vs_seq_len(rows: pd.DataFrame, styles: dict[str, tuple[str, str]]) -> Plot:
    ok = ok_rows(rows)
    ok = ok[ok["peak_memory_bytes"].notna() & (ok["peak_memory_bytes"].astype(float) > 0)]
    return _vs_seq_len(
        "memory_vs_seq_len", "Peak memory vs sequence length", ok, "peak memory (MiB)",
        lambda g: g["peak_memory_bytes"].astype(float) / MIB, styles, "needs peak memory at two or more seq_len values",
    )  # fmt: skip


def vs_heads(rows: pd.DataFrame, styles: dict[str, tuple[str, str]]) -> Plot:
    """Latency and memory against the head count, d_model held fixed (the per-head vs fused question)."""
    title = "Latency and peak memory vs heads (fixed d_model)"
    ok = ok_rows(rows)
    ok = ok[ok["peak_memory_bytes"].notna()]
    metrics = [
        ("latency", "median latency (ms)", lambda g: g["latency_ms"]),
        ("memory", "peak memory (MiB)", lambda g: g["peak_memory_bytes"].astype(float) / MIB),
    ]
    plain_mha = "kv_heads" in ok and bool((ok["kv_heads"] == ok["heads"]).all())
    fig = _series_plot(ok, "heads", metrics, styles, follows_x=("kv_heads",) if plain_mha else ())
    if fig is None:
        return Plot("vs_heads", title, None, "heads do not vary at a fixed d_model in this run")
    _titled(fig, title, constant_label(ok, ("heads", "head_dim")))
    return Plot("vs_heads", title, render(fig), wide=True)


def roofline(rows: pd.DataFrame, styles: dict[str, tuple[str, str]]) -> Plot:
    """Achieved TFLOP/s against arithmetic intensity, under this device's memory and compute roofs."""
    title = "Roofline"
    ok = ok_rows(rows)
    needed = ["arithmetic_intensity", "achieved_tflops", "peak_tflops", "peak_gbps"]
    ok = ok.dropna(subset=needed)
    ok = ok[(ok[needed].astype(float) > 0).all(axis=1)]
    if ok.empty:
        return Plot("roofline", title, None, "no row has intensity, achieved FLOP/s and device peaks")
    fig, (ax,) = _figure(7.0, 4.6)
    intensity = ok["arithmetic_intensity"].astype(float)
    roofs = ok.groupby("dtype", sort=False)[["peak_tflops", "peak_gbps"]].first().astype(float)
    ridges = roofs["peak_tflops"] * 1e3 / roofs["peak_gbps"]
    x = np.geomspace(min(intensity.min(), ridges.min()) / 4, max(intensity.max(), ridges.max()) * 4, 200)
    for (dtype, roof), style in zip(roofs.iterrows(), itertools.cycle(LINE_STYLES), strict=False):
        attainable = np.minimum(roof["peak_tflops"], roof["peak_gbps"] * x / 1e3)
        ax.plot(x, attainable, color="0.25", linestyle=style, linewidth=1.6,
                label=f"roof {dtype}: {roof['peak_gbps']:.3g} GB/s, {roof['peak_tflops']:.3g} TFLOP/s")  # fmt: skip
    for impl, group in ok.groupby("impl", sort=False):
        colour, marker = styles[str(impl)]
        ax.scatter(group["arithmetic_intensity"].astype(float), group["achieved_tflops"].astype(float),
                   color=colour, marker=marker, s=46, label=str(impl), zorder=3, edgecolor="white")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_labels(ax)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, cost model)")
    ax.set_ylabel("achieved TFLOP/s")
    sources = ", ".join(sorted({str(s) for s in ok.get("roofline_source", pd.Series(["?"])).dropna()}))
    ax.set_title(f"{title} (device peaks: {sources})")
    ax.legend(fontsize="small", loc="best")
    return Plot("roofline", title, render(fig))


def speedup_bars(rows: pd.DataFrame, styles: dict[str, tuple[str, str]], baseline: str = DEFAULT_BASELINE) -> Plot:
    """Per case, each implementation's speedup over the baseline, with its bootstrap CI as error bars."""
    title = f"Speedup over {baseline}"
    if baseline not in set(rows["impl"]):
        return Plot("speedup", title, None, f"the run has no {baseline} rows to compare with")
    table = speedup_rows(rows, baseline)
    table = table[(table["impl"] != baseline) & table["speedup"].notna()]
    if table.empty:
        return Plot("speedup", title, None, f"no case has both {baseline} and another implementation measured")
    cases = list(dict.fromkeys(table["case_id"]))
    impls = list(dict.fromkeys(table["impl"]))
    fig, (ax,) = _figure(min(14.0, max(6.4, 1.1 * len(cases) * max(1, len(impls)) / 2)), 4.2)
    width = 0.8 / len(impls)
    for position, impl in enumerate(impls):
        part = table[table["impl"] == impl].set_index("case_id").reindex(cases)
        centre = np.arange(len(cases)) + (position - (len(impls) - 1) / 2) * width
        low = (part["speedup"] - part["speedup_ci_low"]).clip(lower=0).fillna(0)
        high = (part["speedup_ci_high"] - part["speedup"]).clip(lower=0).fillna(0)
        ax.bar(centre, part["speedup"], width, yerr=[low, high], color=styles[impl][0], label=impl,
               capsize=2, error_kw={"linewidth": 0.8})  # fmt: skip
    ax.axhline(1.0, color="0.3", linestyle="--", linewidth=1)
    ax.set_yscale("log")
    times = FuncFormatter(lambda v, p: f"{label}×" if (label := _one_two_five(v, p)) else "")
    ax.yaxis.set_major_formatter(times)
    ax.yaxis.set_minor_formatter(times)
    ax.set_xticks(np.arange(len(cases)), [_case_tick(rows, c) for c in cases], rotation=20 if len(cases) > 4 else 0)
    ax.set_ylabel(f"speedup over {baseline} (ratio of medians)")
    ax.set_title(f"{title} (higher is better; bars: 95% bootstrap CI)")
    ax.legend(fontsize="small")
    return Plot("speedup", title, render(fig))


def _case_tick(rows: pd.DataFrame, case_id: str) -> str:
    first = rows[rows["case_id"] == case_id].iloc[0]
    fields = fields_present(rows, exclude=())
    label = varying_label(rows, {f: first[f] for f in fields}, fields)
    return label or str(first["scenario"])


def all_plots(rows: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> list[Plot]:
    """Every plot of a report, in the order they appear."""
    styles = impl_styles(rows)
    return [
        latency_vs_seq_len(rows, styles),
        memory_vs_seq_len(rows, styles),
        roofline(rows, styles),
        speedup_bars(rows, styles, baseline),
        vs_heads(rows, styles),
    ]
