"""One definition of throughput and efficiency for every view: the useful work over the time, against the roof at
the useful work's minimal traffic; the work executed beside it under its own name (docs/measurement.md,
"Throughput and efficiency").

- **useful TFLOP/s**: the cost model's ``useful_flops`` (masked pairs and padding not counted) over the median
  latency, as FlashAttention reports its throughput: the one rate comparable across implementations, because
  every implementation of a case does the same useful work.
- **FLOP/B**: ``useful_flops`` over the model's minimal ``bytes_moved``: the intensity of the useful work at the
  least traffic it needs.
- **roofline eff.**: useful TFLOP/s over the roof at that intensity. Work an implementation wasted (FLOPs on
  masked scores, padded GEMM tiles, traffic the model does not need) can only lower it: it never rewards waste.
- **executed ×**: FLOPs the kernels executed over the useful ones — the hardware's where ncu counted them, else
  the counted ops', else the model's (:mod:`mhabench.analysis.executed`). 1.0 is no waste; ``torch_mha`` on the
  H100 executed 4.5–5.9× in the four cases of run 20261127T074353Z-default-gpu-counters-partial.

The stored ``achieved_tflops`` and ``roofline_efficiency`` (the executed point, :mod:`mhabench.measure.roofline`)
stay in the files for the roofline plot, which places where the executed work stands.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mhabench.analysis.executed import EXECUTED_TFLOPS, executed, numeric_column
from mhabench.results.columns import BYTES_MOVED, FLOPS, LATENCY_MS, PEAK_GBPS, PEAK_TFLOPS, USEFUL_FLOPS

USEFUL_TFLOPS = "useful_tflops"
USEFUL_INTENSITY = "useful_intensity"
USEFUL_ATTAINABLE_TFLOPS = "useful_attainable_tflops"
USEFUL_EFFICIENCY = "useful_efficiency"
EXECUTED_OVER_USEFUL = "executed_over_useful"
USEFUL_BOUND = "useful_bound"
LABELS = {
    USEFUL_FLOPS: "useful FLOPs",
    USEFUL_INTENSITY: "FLOP/B",
    USEFUL_TFLOPS: "useful TFLOP/s",
    EXECUTED_OVER_USEFUL: "executed ×",
    USEFUL_EFFICIENCY: "roofline eff.",
}
"""The results table's headers for these figures (advise and the report quote the same numbers)."""
TABLE_FORMATS = {USEFUL_INTENSITY: ".1f", USEFUL_TFLOPS: ".3f", EXECUTED_OVER_USEFUL: ".2f", USEFUL_EFFICIENCY: ".1%"}
"""How the results table prints each figure; advise prints them the same way, so a number it quotes is the one the
table shows for that row (44.5% in both, not 44.5% in one and 44 % in the other)."""


def as_in_table(value: float, name: str) -> str:
    """``value`` of the figure ``name`` as the results table prints it."""
    return format(value, TABLE_FORMATS[name])


def useful_flops(rows: pd.DataFrame) -> pd.Series:
    """The model's useful FLOPs; a run older than that column has all its FLOPs (the same without a mask)."""
    return numeric_column(rows, USEFUL_FLOPS).fillna(numeric_column(rows, FLOPS))


def throughput(rows: pd.DataFrame) -> pd.DataFrame:
    """Per row: useful TFLOP/s, useful intensity, the roof there, efficiency, executed over useful FLOPs, bound."""
    useful = useful_flops(rows)
    latency_s = numeric_column(rows, LATENCY_MS) / 1e3
    rate = useful / latency_s / 1e12
    intensity = useful / numeric_column(rows, BYTES_MOVED)
    peak_tflops, peak_gbps = numeric_column(rows, PEAK_TFLOPS), numeric_column(rows, PEAK_GBPS)
    attainable = np.minimum(peak_tflops, intensity * peak_gbps / 1e3)
    ridge = peak_tflops * 1e3 / peak_gbps
    bound = pd.Series(np.where(intensity < ridge, "memory", "compute"), index=rows.index).where(
        intensity.notna() & ridge.notna()
    )
    return pd.DataFrame(
        {
            USEFUL_TFLOPS: rate,
            USEFUL_INTENSITY: intensity,
            USEFUL_ATTAINABLE_TFLOPS: attainable,
            USEFUL_EFFICIENCY: rate / attainable,
            EXECUTED_OVER_USEFUL: executed(rows)[EXECUTED_TFLOPS] / rate,
            USEFUL_BOUND: bound,
        },
        index=rows.index,
    )
