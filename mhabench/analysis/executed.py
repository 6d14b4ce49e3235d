"""What each row's kernel executed, read from the row's own columns: the FLOPs a rate against a roof must count.

``achieved_tflops`` divides every score of the n×L matrix by the time (the convention of the counted ops and of
``FlopCounterMode``). A kernel that skips the key blocks a causal mask hides entirely never executes about half of
them, so for it that rate is no rate the hardware ran and can stand above the compute roof: the H100 run's causal
``fused`` rows (cuDNN) reach 1027–1154 TFLOP/s under a 989 TFLOP/s roof. Such a row executed about its
``useful_flops`` (a little more: the blocks on the diagonal are computed whole, then masked); every other row
(naive, the math backend, a dense mask) executed all its FLOPs. Hardware counters would say exactly; no run
records them yet, so these are the best figures a row holds.

A roofline point is (FLOPs / bytes, FLOPs / time) of the same FLOPs, so the executed intensity is the executed
FLOPs over the bytes the row's roofline used: counted where ``intensity_source`` is ``measured``, else modelled.
Where it is ``hardware`` (``counters: hardware``), Nsight Compute counted the FLOPs the kernels executed and the
DRAM bytes they moved: the row's own rate and intensity are the executed ones, masked blocks or not.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from mhabench.impls.sdpa import kernel_skips_masked_work
from mhabench.results.cells import flag
from mhabench.results.columns import (
    ACHIEVED_TFLOPS,
    ACHIEVED_USEFUL_TFLOPS,
    ARITHMETIC_INTENSITY,
    BYTES_MOVED,
    CAUSAL,
    DRAM_READ_BYTES,
    DRAM_WRITE_BYTES,
    FLOPS,
    FP32_FLOPS,
    HARDWARE_INTENSITY,
    IMPL,
    INTENSITY_SOURCE,
    LATENCY_MS,
    MEASURED_BYTES,
    MEASURED_FLOPS,
    MEASURED_INTENSITY,
    SDPA_BACKEND,
    SKIPS_MASKED_WORK,
    TENSOR_FLOPS,
    USEFUL_FLOPS,
)

EXECUTED_TFLOPS = "executed_tflops"
"""FLOPs the kernel executed per second: ``achieved_useful_tflops`` where it skips masked work, else
``achieved_tflops``."""
EXECUTED_INTENSITY = "executed_intensity"
"""The executed FLOPs over the bytes of the row's roofline (counted or modelled)."""
COUNTED = "counted"
"""True where the row's roofline used the counted FLOPs and bytes (filled on the plot), False where the model's."""
HARDWARE = "hardware"
"""True where the row's roofline used the hardware counters' FLOPs and DRAM bytes."""
SOURCE = "source"
SOURCES = ("model", "counted", "hardware")
"""The three places one row can stand on the roofline: by its cost model, its counted ops, its hardware counters."""


def numeric_column(rows: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column, NaN where it is missing: an older run has no counted or useful-FLOP columns."""
    return pd.to_numeric(rows[name], errors="coerce") if name in rows else pd.Series(float("nan"), index=rows.index)


def skips_masked_work(rows: pd.DataFrame) -> pd.Series:
    """Whether each row's kernel skipped fully masked blocks: its recorded ``skips_masked_work``, or, for a run
    written before that column, decided as the runner decides it (causal, and an SDPA backend or implementation
    that skips: :func:`mhabench.impls.sdpa.kernel_skips_masked_work`)."""

    if not len(rows):
        return pd.Series(dtype=bool, index=rows.index)

    def column(name: str) -> list:
        return rows[name].tolist() if name in rows else [None] * len(rows)

    def decide(recorded: Any, causal: Any, backend: Any, impl: Any) -> bool:
        if (known := flag(recorded)) is not None:
            return known
        return flag(causal) is True and kernel_skips_masked_work(backend if isinstance(backend, str) else "", str(impl))

    decided = map(decide, column(SKIPS_MASKED_WORK), column(CAUSAL), column(SDPA_BACKEND), rows[IMPL].tolist())
    return pd.Series(list(decided), index=rows.index, dtype=bool)


def _placed_by(rows: pd.DataFrame, source: str, intensity: str) -> pd.Series:
    """True where the row's roofline used ``source``'s intensity (``intensity_source``: measured for the counted
    ops, hardware for the counters) and that intensity is positive."""
    recorded = rows[INTENSITY_SOURCE] if INTENSITY_SOURCE in rows else pd.Series("", index=rows.index)
    return (recorded == source) & (numeric_column(rows, intensity) > 0)


def executed(rows: pd.DataFrame) -> pd.DataFrame:
    """Per row: executed TFLOP/s, executed intensity, whether the kernel skips masked work, whether counted.

    A skipping row without useful FLOPs (a run older than those columns) has no executed figures (NaN) rather
    than the full count it did not execute."""
    skips = skips_masked_work(rows)
    is_counted = _placed_by(rows, "measured", MEASURED_INTENSITY)
    by_hardware = _placed_by(rows, "hardware", HARDWARE_INTENSITY)
    achieved = numeric_column(rows, ACHIEVED_TFLOPS)
    intensity = numeric_column(rows, MEASURED_INTENSITY).where(is_counted, numeric_column(rows, ARITHMETIC_INTENSITY))
    rate = numeric_column(rows, ACHIEVED_USEFUL_TFLOPS).where(skips, achieved)
    # both rates share the latency, so their ratio is useful / all FLOPs of the row's source: the same bytes
    # under fewer FLOPs
    intensity = intensity.where(~skips, intensity * rate / achieved)
    return pd.DataFrame(
        {
            EXECUTED_TFLOPS: achieved.where(by_hardware, rate),
            EXECUTED_INTENSITY: numeric_column(rows, HARDWARE_INTENSITY).where(by_hardware, intensity),
            SKIPS_MASKED_WORK: skips,
            COUNTED: is_counted,
            HARDWARE: by_hardware,
        },
        index=rows.index,
    )


def source_points(rows: pd.DataFrame) -> pd.DataFrame:
    """Every place each row stands on the roofline, one line per (row, source) with FLOPs and bytes for it.

    ``model``: the cost model's FLOPs and minimum bytes; ``counted``: the dispatched ops'; ``hardware``: the
    FLOPs ncu counted and the DRAM bytes it saw. Model and counted FLOPs count every score, so for a kernel
    that skips masked blocks they are scaled to the useful ones, as the row's own point is; the hardware's are
    executed FLOPs already. Columns: ``row`` (the rows' index), ``source``, executed intensity and TFLOP/s; a
    source a row lacks is left out."""
    skips = skips_masked_work(rows)
    latency_s = numeric_column(rows, LATENCY_MS) / 1e3
    all_flops = numeric_column(rows, FLOPS)
    useful = (numeric_column(rows, USEFUL_FLOPS) / all_flops).where(skips, 1.0)
    hardware_flops = numeric_column(rows, TENSOR_FLOPS) + numeric_column(rows, FP32_FLOPS)
    dram = numeric_column(rows, DRAM_READ_BYTES) + numeric_column(rows, DRAM_WRITE_BYTES)
    sources = {
        "model": (all_flops * useful, numeric_column(rows, BYTES_MOVED)),
        "counted": (numeric_column(rows, MEASURED_FLOPS) * useful, numeric_column(rows, MEASURED_BYTES)),
        "hardware": (hardware_flops, dram),
    }
    parts = []
    for source, (flops, moved) in sources.items():
        part = pd.DataFrame(
            {
                "row": rows.index,
                SOURCE: source,
                EXECUTED_INTENSITY: (flops / moved).to_numpy(),
                EXECUTED_TFLOPS: (flops / latency_s / 1e12).to_numpy(),
            }
        )
        parts.append(part[(part[[EXECUTED_INTENSITY, EXECUTED_TFLOPS]] > 0).all(axis=1)])
    return pd.concat(parts, ignore_index=True)
