"""The report's model disagreements as the hardware saw them: rows whose Nsight Compute FLOPs or DRAM bytes are
further from the cost model than ``DISAGREEMENT_LIMIT`` (the counted ops' limit).

The counted-ops table above it compares what the dispatched ops say; this one compares what the kernels did.
The FLOPs are set against the model's executed ones (useful where the kernel skips masked blocks, all of them
otherwise), the DRAM bytes against the model's minimal bytes: caches make a few tens of percent ordinary there
(``fused`` moved 1.86× its counted bytes on the H100), a hundredfold is a layout the model does not describe
(``torch_mha``'s per-token GEMM read 65 GB against 208 MiB).
"""

from __future__ import annotations

import pandas as pd

from mhabench.analysis.case_label import case_label
from mhabench.analysis.executed import numeric_column, skips_masked_work
from mhabench.analysis.throughput import useful_flops
from mhabench.measure.op_counts import DISAGREEMENT_LIMIT
from mhabench.results.columns import (
    BYTES_MOVED,
    CASE_ID,
    DRAM_READ_BYTES,
    DRAM_WRITE_BYTES,
    FLOPS,
    FP32_FLOPS,
    IMPL,
    TENSOR_FLOPS,
)
from mhabench.views.report.blocks import Block, Paragraph
from mhabench.views.table import TableModel, format_number, human_bytes, human_count

HEADERS = ("case", "impl", "FLOPs model", "FLOPs hardware", "FLOPs ×", "bytes model", "DRAM bytes", "bytes ×")


def hardware_gaps(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with hardware counters whose FLOPs or DRAM bytes differ from the model's by more than the limit."""
    model_flops = useful_flops(rows).where(skips_masked_work(rows), numeric_column(rows, FLOPS))
    hardware_flops = numeric_column(rows, TENSOR_FLOPS) + numeric_column(rows, FP32_FLOPS).fillna(0)
    dram = numeric_column(rows, DRAM_READ_BYTES) + numeric_column(rows, DRAM_WRITE_BYTES)
    frame = rows.assign(
        model_flops=model_flops,
        hardware_flops=hardware_flops,
        dram_bytes=dram,
        flops_ratio=hardware_flops / model_flops,
        bytes_ratio=dram / numeric_column(rows, BYTES_MOVED),
    )
    counted = frame["hardware_flops"].notna() & frame["dram_bytes"].notna()
    off = lambda ratio: (ratio - 1).abs() > DISAGREEMENT_LIMIT  # noqa: E731
    return frame[counted & (off(frame["flops_ratio"]) | off(frame["bytes_ratio"]))].drop_duplicates([CASE_ID, IMPL])


def hardware_gap_blocks(rows: pd.DataFrame) -> list[Block]:
    """The table, after the counted-ops disagreements; nothing for a run without hardware counters."""
    if TENSOR_FLOPS not in rows or numeric_column(rows, TENSOR_FLOPS).isna().all():
        return []
    flagged = hardware_gaps(rows)
    if flagged.empty:
        return [Paragraph(f"Hardware counters: every profiled row is within {DISAGREEMENT_LIMIT:.0%} of its model.")]
    cells = [
        [
            case_label(r),
            str(r[IMPL]),
            human_count(r["model_flops"]),
            human_count(r["hardware_flops"]),
            format_number(r["flops_ratio"], ".2f"),
            human_bytes(r[BYTES_MOVED]),
            human_bytes(r["dram_bytes"]),
            format_number(r["bytes_ratio"], ".3g"),
        ]
        for _, r in flagged.iterrows()
    ]
    text = (
        f"{len(cells)} row(s) whose hardware counters (Nsight Compute: tensor + FP32 FLOPs, DRAM bytes) differ from "
        f"the cost model by more than {DISAGREEMENT_LIMIT:.0%} (FLOPs against the model's executed ones; `mhabench "
        "explain RUN` says in which stage)."
    )
    return [Paragraph(text), TableModel("Hardware against the model", HEADERS, cells, [False, False, *[True] * 6])]
