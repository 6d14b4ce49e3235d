"""The report's plots: small multiples on a 5-field sweep, the roofline's counted vs modelled points.

Every plot is built with warnings turned into errors: a collapsed constrained layout or a legend
that matplotlib cannot place warns, and that is a layout bug.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from synthetic_runs import five_field_rows, row, samples, with_counts

from mhabench.views import plots

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
    styles = plots.impl_styles(sweep)
    shown, left_out = plots.shown_impls(sweep, "naive")
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
    styles = plots.impl_styles(small)
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
    images = plots.faceted("latency_vs_seq_len", rows, plots.impl_styles(rows), "naive")
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
    (image,) = plots.faceted("latency_vs_seq_len", rows, plots.impl_styles(rows), "naive")
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
    (fig,), facets, _ = plots.facet_figures(rows, "seq_len", [plots.LATENCY], plots.impl_styles(rows))
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
    points = plots.roofline_points(rows).set_index("impl")
    assert points.loc["naive", "intensity"] == pytest.approx(2 * rows.loc[0, "arithmetic_intensity"])
    assert points.loc["naive", "intensity"] == pytest.approx(rows.loc[0, "measured_intensity"])
    assert points.loc["fused", "intensity"] == rows.loc[1, "arithmetic_intensity"]
    # the row says its roofline used the model: its counted intensity is not used
    assert points.loc["per_head", "intensity"] == rows.loc[2, "arithmetic_intensity"]
    assert list(points["source"]) == ["measured", "modelled", "modelled"]
    assert list(points["achieved_tflops"]) == list(rows["achieved_tflops"])


def test_roofline_marks_counted_points_filled_and_modelled_hollow() -> None:
    rows = _roofline_rows()
    fig = plots.roofline_figure(rows, plots.impl_styles(rows))
    assert fig is not None
    (ax,) = fig.axes
    by_x = {float(c.get_offsets()[0][0]): c for c in ax.collections}
    naive_x = float(rows.loc[0, "measured_intensity"])
    assert by_x[naive_x].get_facecolors()[0][3] == 1.0  # filled: counted
    assert len(by_x[float(rows.loc[1, "arithmetic_intensity"])].get_facecolors()) == 0  # hollow: modelled
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert labels[-2:] == ["counted intensity", "modelled intensity"]


def test_roofline_of_a_run_without_counts_has_only_modelled_points() -> None:
    rows = pd.DataFrame([row("naive", samples(4, 0.01)), row("fused", samples(1, 0.01))])
    assert set(plots.roofline_points(rows)["source"]) == {"modelled"}
    plot = plots.roofline(rows, plots.impl_styles(rows))
    assert plot.png is not None and plot.caption == "Filled: intensity counted from the ops; hollow: the model's."
