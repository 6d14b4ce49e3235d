"""The report's "Stages" section: per case, a stacked bar per implementation, the model's time beside the measured.

Measured: each stage's share of the profiled call (docs/stages.md) times the row's median latency, so the bar is
as long as the row's latency and split as its profiled call was. Model: each stage's FLOPs and bytes from the cost
model, timed at the roof (the longer of FLOPs over the peak FLOP/s and bytes over the peak bandwidth, the row's
own roofs as the run corrects them, :func:`~mhabench.analysis.throughput.with_roofs`): the least time the stage
could take. The gap between the two bars of a stage is what it cost beyond the model; ``mhabench explain`` says why.
"""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from mhabench.analysis.explain.explain import row_stages
from mhabench.analysis.throughput import with_roofs
from mhabench.results.columns import CASE_ID, IMPL, LATENCY_MS, PEAK_GBPS, PEAK_TFLOPS, REPEAT, STATUS
from mhabench.results.kernels import read_kernels
from mhabench.results.schema import RowStatus
from mhabench.results.stages import StageFigures
from mhabench.results.store import Run
from mhabench.stage_cost import STAGE_LABELS, STAGES
from mhabench.views.plot_style import Plot, fitted_legend, ok_rows, render
from mhabench.views.report.blocks import Block, Heading, Paragraph

MAX_CASES = 6
"""Cases drawn: the section is an overview; ``mhabench explain`` lists every row."""
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#bab0ac")
COLOURS = dict(zip(STAGES, PALETTE, strict=True))


def stage_blocks(run: Run) -> list[Block]:
    """The section, or nothing when no row of the run has a breakdown."""
    rows = with_roofs(ok_rows(run.frame))  # the model's time at the run's roof, not at a probe that read slow
    kernels = read_kernels(run.path)
    plots = []
    for case_id, case_rows in list(rows.groupby(CASE_ID, sort=False))[:MAX_CASES]:
        bars = _bars(case_rows, kernels)
        if bars:
            plots.append(Plot(f"stages_{len(plots) + 1}", f"Stages: {case_id}", render(_figure(str(case_id), bars))))
    if not plots:
        return []
    intro = (
        "Per implementation, the measured bar splits its median latency as its profiled call split, stage by stage; "
        "the model bar is each stage's cost-model FLOPs and bytes at the row's roofs (the least time the stage could "
        "take); a run with several repeats or replicates draws its first. `mhabench explain RUN` says why a slower "
        "implementation's stage costs more."
    )
    left = rows[CASE_ID].nunique() - len(plots)
    more = f" {left} more case(s) are not drawn." if left > 0 else ""
    return [Heading("Stages"), Paragraph(intro + more), *plots]


Bar = tuple[str, dict[str, float], dict[str, float]]
"""An implementation, its model ms per stage, its measured ms per stage."""


def _bars(case_rows: pd.DataFrame, kernels: pd.DataFrame | None) -> list[Bar]:
    """Per implementation with a breakdown: (impl, model ms per stage, measured ms per stage), from the case's
    first repeat only: a replicated or ``--repeat`` run would otherwise draw every implementation once per pass."""
    if REPEAT in case_rows:
        case_rows = case_rows[case_rows[REPEAT] == case_rows[REPEAT].min()]
    bars = []
    for _, row in case_rows[case_rows[STATUS] == RowStatus.OK].iterrows():
        figures, _ = row_stages(row.to_dict(), kernels)
        latency_ms = float(row[LATENCY_MS])
        if not figures or math.isnan(latency_ms):
            continue
        measured = {f.stage: f.time_share * latency_ms for f in figures if f.time_share == f.time_share}
        bars.append((str(row[IMPL]), _model_ms(figures, row), measured))
    return bars


def _model_ms(figures: list[StageFigures], row: pd.Series) -> dict[str, float]:
    """Each stage's model FLOPs and bytes at the roof: max(FLOPs / peak, bytes / bandwidth), in ms."""
    peak_tflops, peak_gbps = pd.to_numeric(row.get(PEAK_TFLOPS)), pd.to_numeric(row.get(PEAK_GBPS))
    if not (peak_tflops > 0 and peak_gbps > 0):
        return {}
    return {
        f.stage: 1e3 * max((f.model_flops or 0) / (peak_tflops * 1e12), (f.model_bytes or 0) / (peak_gbps * 1e9))
        for f in figures
        if f.model_flops is not None or f.model_bytes is not None
    }


def _figure(case_id: str, bars: list[Bar]) -> Figure:
    fig = Figure(figsize=(8, 0.8 + 0.6 * len(bars)), layout="constrained")
    ax = fig.add_subplot()
    labels = []
    for position, (impl, model, measured) in enumerate(reversed(bars)):
        for offset, (kind, figures) in enumerate((("measured", measured), ("model", model))):
            y, left = 2 * position + offset * 0.8, 0.0
            for stage in STAGES:
                width = figures.get(stage, 0.0)
                if width > 0:
                    ax.barh(y, width, left=left, height=0.7, color=COLOURS[stage])
                    left += width
            labels.append((y, f"{impl} {kind}"))
    ax.set_yticks([y for y, _ in labels], [text for _, text in labels], fontsize="small")
    ax.set_xlabel("ms per call")
    ax.set_title(case_id, fontsize="medium")
    shown = [s for s in STAGES if any(s in m or s in d for _, m, d in bars)]
    handles = [Patch(color=COLOURS[s], label=STAGE_LABELS[s]) for s in shown]
    fitted_legend(fig, handles, "outside lower center")
    return fig
