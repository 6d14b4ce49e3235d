"""The report's plots: small multiples on a 5-field sweep, the roofline's counted vs modelled points, and no
roofline point above its roof (the executed FLOPs: useful ones for a kernel that skips masked work).

Every plot is built with warnings turned into errors: a collapsed constrained layout or a legend
that matplotlib cannot place warns, and that is a layout bug.
"""

from __future__ import annotations

import io
import tarfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image
from synthetic_runs import PEAK_GBPS, PEAK_TFLOPS, five_field_rows, row, samples, with_counts

from mhabench.analysis.executed import EXECUTED_INTENSITY, EXECUTED_TFLOPS
from mhabench.results.columns import (
    ACHIEVED_TFLOPS,
    ACHIEVED_USEFUL_TFLOPS,
    IMPL,
    LATENCY_MS,
    LATENCY_P25_MS,
    LATENCY_P75_MS,
    SAMPLE_COUNT,
    SKIPS_MASKED_WORK,
    STATUS,
)
from mhabench.results.schema import MIN_SPREAD_SAMPLES
from mhabench.results.store import load_run
from mhabench.views import plot_style, plots, roofline

FINDINGS_RUNS = Path(__file__).resolve().parents[1] / "docs" / "findings" / "runs"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def warnings_are_errors() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.fixture(scope="module")
def sweep() -> pd.DataFrame:
    return pd.DataFrame(five_field_rows())


def test_a_five_field_sweep_is_faceted_into_panels_of_at_most_eight_lines(sweep: pd.DataFrame) -> None:
    styles = plot_style.impl_styles(sweep)
    shown, left_out = plot_style.shown_impls(sweep, "naive")
    assert left_out == ["impl7", "impl8"] and "naive" in shown  # the baseline stays although it is the slowest
    figures, facets, panels = plots.facet_figures(sweep[sweep["impl"].isin(shown)], "seq_len", [plots.LATENCY], styles)
    assert facets == ["batch", "d_model", "heads", "causal"]  # kv_heads = heads: no facet of its own
    assert panels == 16 and [len(fig.axes) for fig in figures] == [12, 4]
    for fig in figures:
        for ax in fig.axes:
            colours = [line.get_color() for line in ax.get_lines()]
            assert len(colours) == 8 and styles["naive"][0] in colours
            assert all(len(line.get_xdata()) == 2 for line in ax.get_lines())  # seq_len 64 and 128


def test_the_legend_is_outside_every_axes(sweep: pd.DataFrame) -> None:
    small = sweep[(sweep["batch"] == 1) & (sweep["d_model"] == 64)]
    styles = plot_style.impl_styles(small)
    (fig,), _, _ = plots.facet_figures(
        small[small["impl"].isin(["naive", "impl0"])], "seq_len", [plots.LATENCY, plots.MEMORY], styles
    )
    FigureCanvasAgg(fig).draw()
    (legend,) = fig.legends
    box = legend.get_window_extent()
    assert len(fig.axes) == 8 and all(not box.overlaps(ax.get_window_extent()) for ax in fig.axes)
    assert [text.get_text() for text in legend.get_texts()] == ["impl0", "naive"]


def test_faceted_plot_images_names_and_caption(sweep: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plots, "MAX_PANELS", 6)  # 8 panels (batch 1): two images, cheap to render
    rows = sweep[sweep["batch"] == 1]
    images = plots.faceted("latency_vs_seq_len", rows, plot_style.impl_styles(rows), "naive")
    assert [image.name for image in images] == ["latency_vs_seq_len", "latency_vs_seq_len_2"]
    assert images[1].title.endswith("(2 of 2)") and all(image.wide for image in images)
    assert images[0].caption.startswith("One panel per d_model × heads × causal value; lines: implementations.")
    assert "naive and the 7 fastest others of 10 are drawn; left out: impl7, impl8." in images[0].caption
    for image in images:
        assert image.png is not None and image.png.startswith(PNG_SIGNATURE) and len(image.png) < 100_000


def test_a_plot_stops_at_max_images_and_says_so(sweep: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plots, "MAX_PANELS", 3)
    monkeypatch.setattr(plots, "MAX_IMAGES", 1)
    rows = sweep[(sweep["batch"] == 1) & sweep["impl"].isin(["naive", "impl0"])]
    (image,) = plots.faceted("latency_vs_seq_len", rows, plot_style.impl_styles(rows), "naive")
    assert "The first 3 of 8 panels are drawn (the tables hold every case)." in image.caption
    assert "left out" not in image.caption


def test_repeats_of_a_point_are_one_line_at_their_median() -> None:
    rows = pd.DataFrame(
        [
            row(impl, [ms * (1 + repeat) * seq_len / 64] * 3, seq_len=seq_len, repeat=repeat)
            for impl, ms in (("naive", 2.0), ("fused", 1.0))
            for seq_len in (64, 128)
            for repeat in range(3)
        ]
    )
    (fig,), facets, _ = plots.facet_figures(rows, "seq_len", [plots.LATENCY], plot_style.impl_styles(rows))
    (ax,) = fig.axes
    assert facets == [] and len(ax.get_lines()) == 2
    naive = next(line for line in ax.get_lines() if line.get_color() == "C0")
    assert list(naive.get_ydata()) == [4.0, 8.0]  # median of 2, 4, 6 at n=64 and of 4, 8, 12 at n=128


def _roofline_rows() -> pd.DataFrame:
    counted = with_counts(row("naive", samples(4, 0.01)), bytes_factor=0.5)  # counted intensity: twice the model's
    modelled_source = {**with_counts(row("per_head", samples(3, 0.01)), 2.0), "intensity_source": "modelled"}
    return pd.DataFrame([counted, row("fused", samples(1, 0.01)), modelled_source])


def test_roofline_places_each_row_by_its_intensity_source() -> None:
    rows = _roofline_rows()
    points = roofline.roofline_points(rows).set_index("impl")
    assert points.loc["naive", EXECUTED_INTENSITY] == pytest.approx(2 * rows.loc[0, "arithmetic_intensity"])
    assert points.loc["naive", EXECUTED_INTENSITY] == pytest.approx(rows.loc[0, "measured_intensity"])
    assert points.loc["fused", EXECUTED_INTENSITY] == rows.loc[1, "arithmetic_intensity"]
    # the row says its roofline used the model: its counted intensity is not used
    assert points.loc["per_head", EXECUTED_INTENSITY] == rows.loc[2, "arithmetic_intensity"]
    assert list(points["source"]) == ["measured", "modelled", "modelled"]
    assert list(points[EXECUTED_TFLOPS]) == list(rows["achieved_tflops"])  # nothing causal: every FLOP executed


def test_roofline_marks_counted_points_filled_and_modelled_hollow() -> None:
    rows = _roofline_rows()
    fig = roofline.roofline_figure(rows, plot_style.impl_styles(rows))
    assert fig is not None
    (ax,) = fig.axes
    by_x = {float(c.get_offsets()[0][0]): c for c in ax.collections}
    naive_x = float(rows.loc[0, "measured_intensity"])
    assert by_x[naive_x].get_facecolors()[0][3] == 1.0  # filled: counted
    assert len(by_x[float(rows.loc[1, "arithmetic_intensity"])].get_facecolors()) == 0  # hollow: modelled
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert labels[-2:] == ["counted intensity", "modelled intensity"]


def test_a_dtype_with_two_roofs_names_the_implementations_on_each() -> None:
    """fused_fp8 sits in a bf16 case on the fp8 tensor rate: two roofs for one dtype, each named by its rows."""
    fp8 = {**row("fused_fp8", samples(0.5, 0.01)), "peak_tflops": 2 * PEAK_TFLOPS}
    rows = pd.DataFrame([row("fused", samples(1, 0.01)), fp8, row("naive", samples(4, 0.01))])
    fig = roofline.roofline_figure(rows, plot_style.impl_styles(rows))
    assert fig is not None
    labels = [text.get_text() for text in fig.legends[0].get_texts() if text.get_text().startswith("roof")]
    assert labels == [
        f"roof float32 (fused, naive): {PEAK_GBPS:.3g} GB/s, {PEAK_TFLOPS:.3g} TFLOP/s",
        f"roof float32 (fused_fp8): {PEAK_GBPS:.3g} GB/s, {2 * PEAK_TFLOPS:.3g} TFLOP/s",
    ]
    alone = roofline.roofline_figure(rows.iloc[[0, 2]], plot_style.impl_styles(rows))
    assert alone is not None
    assert [t.get_text() for t in alone.legends[0].get_texts() if t.get_text().startswith("roof")] == [
        f"roof float32: {PEAK_GBPS:.3g} GB/s, {PEAK_TFLOPS:.3g} TFLOP/s"
    ]


def test_roofline_of_a_run_without_counts_has_only_modelled_points() -> None:
    rows = pd.DataFrame([row("naive", samples(4, 0.01)), row("fused", samples(1, 0.01))])
    assert set(roofline.roofline_points(rows)["source"]) == {"modelled"}
    plot = roofline.roofline(rows, plot_style.impl_styles(rows))
    assert plot.png is not None and plot.caption == "Filled: intensity counted from the ops; hollow: the model's."


# --- no point above a roof: what the kernel executed -------------------------------------------------------


def _causal(impl: str, median_ms: float, sdpa_backend: str, skips: bool | None) -> dict[str, Any]:
    """A causal row with counted FLOPs and bytes, 55 % of its FLOPs useful; ``skips`` None: a run written before
    ``skips_masked_work``, so the row's causal flag, backend and implementation decide."""
    record = with_counts(row(impl, samples(median_ms, 0.01)))
    useful = 0.55 * record["flops"]
    return {
        **record,
        "causal": True,
        "sdpa_backend": sdpa_backend,
        "skips_masked_work": skips,
        "useful_flops": useful,
        ACHIEVED_USEFUL_TFLOPS: useful / (record[LATENCY_MS] / 1e3) / 1e12,
    }


def _roof(points: pd.DataFrame) -> pd.Series:
    return roofline.roof_tflops(points["peak_tflops"], points["peak_gbps"], points[EXECUTED_INTENSITY])


@pytest.mark.parametrize("skips", [True, None], ids=["recorded", "decided-from-backend"])
def test_a_causal_flash_row_above_the_roof_is_plotted_at_its_useful_flops(skips: bool | None) -> None:
    """Its ``achieved_tflops`` counts the masked half it skips and stands above the compute roof; the point is
    the useful FLOPs over the same bytes and the same time, under the roof."""
    rows = pd.DataFrame([_causal("fused", 0.01, "flash", skips)])
    flash = rows.iloc[0]
    assert flash[ACHIEVED_TFLOPS] > PEAK_TFLOPS  # what the plot drew before
    point = roofline.roofline_points(rows).iloc[0]
    assert point[SKIPS_MASKED_WORK]
    assert point[EXECUTED_TFLOPS] == flash[ACHIEVED_USEFUL_TFLOPS]
    assert point[EXECUTED_INTENSITY] == pytest.approx(flash["useful_flops"] / flash["measured_bytes"])
    assert point[EXECUTED_TFLOPS] <= roofline.roof_tflops(PEAK_TFLOPS, PEAK_GBPS, point[EXECUTED_INTENSITY])
    plot = roofline.roofline(rows, plot_style.impl_styles(rows))
    assert "1 point(s) of kernels that skip the blocks a causal mask hides are placed by their useful" in plot.caption


@pytest.mark.parametrize(("impl", "backend"), [("naive", ""), ("sdpa_math", "math")])
def test_a_causal_row_that_computes_every_score_is_plotted_at_its_full_flops(impl: str, backend: str) -> None:
    """naive and the math backend materialize the n×L scores and mask them after: they execute every FLOP."""
    rows = pd.DataFrame([_causal(impl, 0.04, backend, None)])
    full = rows.iloc[0]
    point = roofline.roofline_points(rows).iloc[0]
    assert not point[SKIPS_MASKED_WORK]
    assert point[EXECUTED_TFLOPS] == full[ACHIEVED_TFLOPS] > full[ACHIEVED_USEFUL_TFLOPS]
    assert point[EXECUTED_INTENSITY] == full["measured_intensity"]
    assert "useful FLOPs" not in roofline.roofline(rows, plot_style.impl_styles(rows)).caption


def test_no_point_of_the_h100_run_stands_above_its_roof(h100_run: Path) -> None:
    """The real H100 run (bf16, roofs 989 TFLOP/s and 3350 GB/s): every point the roofline draws is at most its
    roof × (1 + noise). The noise is the row's IQR / median where it has ``MIN_SPREAD_SAMPLES`` samples (a median
    from the faster half would sit that much higher), else the run's ``noise_threshold``: the spread the run
    still calls steady. Three causal ``fused`` rows (cuDNN, which skips masked blocks) have ``achieved_tflops``
    above the compute roof; they are drawn at their useful TFLOP/s."""
    run = load_run(h100_run)
    rows = run.frame
    points = roofline.roofline_points(rows)
    ok = rows.loc[points.index]
    assert len(points) == (rows[STATUS] == "ok").sum()  # every ok row is drawn
    fig = roofline.roofline_figure(rows, plot_style.impl_styles(rows))
    assert fig is not None
    drawn = np.concatenate([collection.get_offsets() for collection in fig.axes[0].collections])
    assert sorted(map(tuple, drawn)) == sorted(zip(points[EXECUTED_INTENSITY], points[EXECUTED_TFLOPS], strict=True))
    spread = (ok[LATENCY_P75_MS] - ok[LATENCY_P25_MS]) / ok[LATENCY_MS]
    noise = spread.where(ok[SAMPLE_COUNT] >= MIN_SPREAD_SAMPLES, run.manifest.config["timing"]["noise_threshold"])
    above = points[points[EXECUTED_TFLOPS] > _roof(points) * (1 + noise)]
    assert above.empty, above
    over = ok[ok[ACHIEVED_TFLOPS] > ok["peak_tflops"]]
    assert list(over[IMPL]) == ["fused"] * 3 and over["causal"].all()
    assert (points.loc[over.index, EXECUTED_TFLOPS] == over[ACHIEVED_USEFUL_TFLOPS]).all()


def with_hardware(record: dict[str, Any], bytes_factor: float) -> dict[str, Any]:
    """``record`` placed by hardware counters that saw the model's FLOPs and ``bytes_factor`` × its counted bytes."""
    counted = with_counts(record)
    flops, dram = counted["flops"], counted["measured_bytes"] * bytes_factor
    return {
        **counted,
        "tensor_flops": flops,
        "fp32_flops": 0,
        "dram_read_bytes": dram * 0.75,
        "dram_write_bytes": dram * 0.25,
        "hardware_intensity": flops / dram,
        "intensity_source": "hardware",
    }


def test_a_row_with_hardware_counters_stands_at_the_hardware_intensity_and_shows_all_three() -> None:
    rows = pd.DataFrame(
        [with_hardware(row("fused", samples(5, 0.01)), bytes_factor=2.0), row("naive", samples(5, 0.02))]
    )
    points = roofline.roofline_points(rows).set_index("impl")
    assert points.loc["fused", "source"] == "hardware"
    assert points.loc["fused", EXECUTED_INTENSITY] == pytest.approx(rows.loc[0, "arithmetic_intensity"] / 2)
    every = roofline.source_points(rows)
    assert sorted(every[every["row"] == 0]["source"]) == ["counted", "hardware", "model"]
    assert list(every[every["row"] == 1]["source"]) == ["model"]
    plot = roofline.roofline(rows, plot_style.impl_styles(rows))
    assert plot.png is not None and "hardware counters" in plot.caption


# --- issue 29: the plots with real runs and the longest labels our configs produce ------------------

MASKS_RUN_ID = "20261127T074858Z-gpu-masks-partial"


def shared_run(h100_run: Path, run_id: str) -> Path:
    found = h100_run.parent / run_id
    if not found.is_dir():
        pytest.skip(f"shared/runs/{run_id} is not on this machine")
    return found


def _drawn(fig: Any) -> Any:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _overlaps(boxes: list[Any]) -> bool:
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_speedup_bars_with_the_longest_mask_labels_keep_their_plot_area_and_ticks(h100_run: Path) -> None:
    """Issue 29: long case labels shrank the plot to a sliver, overprinted, and left "1×" as the only tick."""
    from mhabench.analysis.speedup import speedup_rows

    rows = speedup_rows(load_run(shared_run(h100_run, MASKS_RUN_ID)).frame, "naive")
    table = rows[(rows["impl"] != "naive") & rows["speedup"].notna()]
    cases = list(dict.fromkeys(table["case_id"]))
    fig = plots._bar_figure(table, rows, cases, plot_style.impl_styles(rows), "naive")
    renderer = _drawn(fig)
    (ax,) = fig.axes
    assert ax.get_position().width > 0.4 and ax.get_position().height > 0.4  # a plot, not a sliver
    labels = [t for t in ax.get_yticklabels() if t.get_text()]
    assert len(labels) == len(cases) and not _overlaps([t.get_window_extent(renderer) for t in labels])
    assert all("window=0" not in t.get_text() and "lengths=none" not in t.get_text() for t in labels)
    values = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert len(values) >= 3 and "1×" in values


def test_a_narrow_speedup_range_still_gets_several_ticks() -> None:
    assert plots.speedup_ticks(0.9, 1.3) == [1.0, 1.25]
    assert len(plots.speedup_ticks(0.85, 1.6)) >= 3
    wide = plots.speedup_ticks(0.01, 500)
    assert 1.0 in wide and len(wide) <= plots.MAX_SPEEDUP_TICKS


def test_the_latency_title_fits_the_figure(h100_run: Path) -> None:
    """Issue 29: the GPU latency plot's title (every constant field) was cut at both ends."""
    rows = load_run(h100_run).frame
    (image, *_) = plots.faceted("latency_vs_seq_len", rows, plot_style.impl_styles(rows), "naive")
    assert image.png is not None
    subtitle = plot_style.constant_label(rows[rows["status"] == "ok"], ("seq_len",))
    assert subtitle == "bfloat16"  # window=0, lengths=none, one rank … add nothing
    longest = " ".join(f"field{i}=value{i}" for i in range(30))  # a subtitle longer than any figure is wide
    for width_in in (6.4, 9.6):
        fig = plots.Figure(figsize=(width_in, 3.0), layout="constrained")
        fig.add_subplot()
        plot_style.as_plots("latency", "Latency vs sequence length (log-log)", [fig], longest, "")
        box = fig._suptitle.get_window_extent(_drawn(fig))
        assert box.x0 >= 0 and box.x1 <= fig.bbox.width


def test_roofline_tick_labels_do_not_run_together(h100_run: Path) -> None:
    """Issue 29: over four decades the roofline's x labels read "100200" and "10002000 5000"."""
    rows = load_run(h100_run).frame
    fig = roofline.roofline_figure(rows, plot_style.impl_styles(rows))
    assert fig is not None
    renderer = _drawn(fig)
    ax = fig.axes[0]
    for ticks in (ax.xaxis.get_majorticklabels() + ax.xaxis.get_minorticklabels(),):
        shown = [t for t in ticks if t.get_text() and t.get_visible()]
        inside = [t for t in shown if ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]]
        assert len(inside) >= 3 and not _overlaps([t.get_window_extent(renderer) for t in inside])
    assert not [t for t in ax.xaxis.get_minorticklabels() if t.get_text()]  # four decades: powers of ten only


def test_a_packed_batch_is_labelled_one_row_in_the_plots() -> None:
    rows = pd.DataFrame(
        [
            {"seq_len": 8, "batch": b, "layout": layout, "lengths": "4.4", "mask": "document", "causal": True}
            for b, layout in ((2, "padded"), (2, "packed"), (4, "padded"))
        ]
    )
    fields = ["batch", "layout", "lengths", "mask", "causal"]
    label = plot_style.varying_label(rows, rows.iloc[1].to_dict(), fields)
    assert (
        label == "b=1 layout=packed"
        and plot_style.varying_label(rows, rows.iloc[0].to_dict(), fields) == "b=2 layout=padded"
    )


def test_a_label_leaves_out_what_another_field_already_says() -> None:
    values = {"heads": 12, "kv_heads": 12, "d_model": 768, "head_dim": 64, "score_mod": "softcap", "softcap": 50.0}
    assert [f for f in values if plot_style.says_something(f, values)] == ["heads", "d_model", "softcap"]
    grouped = {**values, "kv_heads": 4, "head_dim": 256, "score_mod": "alibi", "softcap": 0.0, "window": 0}
    assert [f for f in grouped if plot_style.says_something(f, grouped)] == [
        "heads",
        "kv_heads",
        "d_model",
        "head_dim",
        "score_mod",
    ]


@pytest.fixture(scope="module")
def loaded_default_run(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The stored default run: four implementations over three lengths, one panel per plot."""
    folder = tmp_path_factory.mktemp("default")
    with tarfile.open(FINDINGS_RUNS / "20261127T113344Z-default.tar.xz") as archive:
        archive.extractall(folder, filter="data")
    return load_run(folder / "20261127T113344Z-default").frame


def _legend_inside(fig: plots.Figure) -> tuple[list[str], bool]:
    """The figure legend's labels, and whether its box (markers and labels) lies within the figure's."""
    renderer = _drawn(fig)
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    return [text.get_text() for text in legend.get_texts()], box.x0 >= 0 and box.x1 <= fig.bbox.width


@pytest.mark.parametrize("name", ["latency_vs_seq_len", "memory_vs_seq_len"])
def test_the_default_runs_latency_and_memory_plots_are_wide_and_keep_their_legend_whole(
    loaded_default_run: pd.DataFrame, name: str
) -> None:
    """The one-panel plots of the default run were 320 px wide, their legend cut at both ends (`naive` lost its
    marker, `torch_mha` read `torch`)."""
    _, x, metrics, _ = plots.FACETED[name]
    rows = plot_style.ok_rows(loaded_default_run)
    styles = plot_style.impl_styles(rows)
    (fig,), _, _ = plots.facet_figures(rows, x, metrics, styles)
    labels, inside = _legend_inside(fig)
    assert labels == ["naive", "per_head", "fused", "torch_mha"] and inside
    (image,) = plots.faceted(name, loaded_default_run, styles, "naive")
    assert image.png is not None
    assert Image.open(io.BytesIO(image.png)).size[0] >= plots.MIN_FIGURE_WIDTH_IN * plot_style.DPI


def test_a_legend_of_long_names_takes_fewer_columns_until_it_fits() -> None:
    fig = plots.Figure(figsize=(3.2, 2.4), layout="constrained")
    fig.add_subplot()
    names = ["an_implementation_with_a_long_name", "another_long_implementation", "naive", "torch_mha"]
    plot_style.fitted_legend(
        fig, plot_style.impl_handles(names, {n: ("C0", "o") for n in names}), "outside lower center"
    )
    labels, inside = _legend_inside(fig)
    assert labels == names and inside and fig.legends[0]._ncols < 4
