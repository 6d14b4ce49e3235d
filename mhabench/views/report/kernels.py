"""The report's "Top kernels" section (``mhabench report --kernels N``): per profiled row, its longest kernels.

A row's hardware columns sum its kernels; which of them is memory-bound (DRAM bytes per FLOP far above the
ridge) is only visible per kernel, so this section lists them from the run's kernels.csv
(:mod:`mhabench.results.kernels`), longest first.
"""

from __future__ import annotations

import math

import pandas as pd

from mhabench.results.cells import number_of
from mhabench.results.kernels import read_kernels, top_kernels
from mhabench.results.store import Run
from mhabench.views.report.blocks import Block, Heading, Paragraph
from mhabench.views.table import TableModel, format_number, human_bytes, human_count

NAME_WIDTH = 60
"""Longest kernel name shown: template signatures run to hundreds of characters."""


def kernel_blocks(run: Run, count: int) -> list[Block]:
    """The section for the ``count`` longest kernels of every profiled row; nothing when ``count`` is 0."""
    if count <= 0:
        return []
    kernels = read_kernels(run.path)
    if kernels is None or kernels.empty:
        return [Heading("Top kernels"), Paragraph("No kernels.csv: this run was not profiled (counters: hardware).")]
    keys = kernels[["case_id", "impl", "repeat"]].drop_duplicates()
    blocks: list[Block] = [
        Heading("Top kernels"),
        Paragraph(
            f"The {count} longest kernels of each profiled row's one call under Nsight Compute (durations are "
            "replayed ones, not the row's latency; FLOP/B is tensor plus FP32 FLOPs over DRAM bytes)."
        ),
    ]
    repeats = keys["repeat"].nunique() > 1
    for key in keys.itertuples(index=False):
        top = top_kernels(kernels, key.case_id, key.impl, key.repeat, count)
        title = kernel_table_label(key.case_id, key.impl, key.repeat if repeats else None)
        blocks += [Heading(title, level=3), _table(title, top)]
    return blocks


def kernel_table_label(case_id: str, impl: str, repeat: int | None = None) -> str:
    """What a kernel table belongs to, said above it (a Markdown or HTML table has no title of its own)."""
    return f"{case_id}: {impl}" + (f" (repeat {repeat})" if repeat is not None else "")


def _intensity(kernel: pd.Series) -> float:
    flops = (number_of(kernel["tensor_flops"]) or 0.0) + (number_of(kernel["fp32_flops"]) or 0.0)
    dram = (number_of(kernel["dram_read_bytes"]) or 0.0) + (number_of(kernel["dram_write_bytes"]) or 0.0)
    return flops / dram if dram > 0 else math.nan


def _table(title: str, top: pd.DataFrame) -> TableModel:
    headers = ["kernel", "ms", "DRAM read", "DRAM write", "L2", "tensor FLOPs", "FP32 FLOPs", "FLOP/B"]
    cells = [
        [
            str(kernel["kernel_name"])[:NAME_WIDTH],
            format_number(kernel["duration_ms"], ".4f"),
            human_bytes(kernel["dram_read_bytes"]),
            human_bytes(kernel["dram_write_bytes"]),
            human_bytes(kernel["l2_bytes"]),
            human_count(kernel["tensor_flops"]),
            human_count(kernel["fp32_flops"]),
            format_number(_intensity(kernel), ".1f"),
        ]
        for _, kernel in top.iterrows()
    ]
    return TableModel(title, headers, cells, [False] + [True] * 7, records=top)
