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
"""

from __future__ import annotations

import pandas as pd

from mhabench.impls.sdpa import kernel_skips_masked_work
from mhabench.results.schema import (
    ACHIEVED_TFLOPS,
    ACHIEVED_USEFUL_TFLOPS,
    ARITHMETIC_INTENSITY,
    CAUSAL,
    IMPL,
    INTENSITY_SOURCE,
    MEASURED_INTENSITY,
    SDPA_BACKEND,
    SKIPS_MASKED_WORK,
    flag,
)

EXECUTED_TFLOPS = "executed_tflops"
"""FLOPs the kernel executed per second: ``achieved_useful_tflops`` where it skips masked work, else
``achieved_tflops``."""
EXECUTED_INTENSITY = "executed_intensity"
"""The executed FLOPs over the bytes of the row's roofline (counted or modelled)."""
COUNTED = "counted"
"""True where the row's roofline used the counted FLOPs and bytes (filled on the plot), False where the model's."""


def numeric_column(rows: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column, NaN where it is missing: an older run has no counted or useful-FLOP columns."""
    return pd.to_numeric(rows[name], errors="coerce") if name in rows else pd.Series(float("nan"), index=rows.index)


def skips_masked_work(rows: pd.DataFrame) -> pd.Series:
    """Whether each row's kernel skipped fully masked blocks: its recorded ``skips_masked_work``, or, for a run
    written before that column, decided as the runner decides it (causal, and an SDPA backend or implementation
    that skips: :func:`mhabench.impls.sdpa.kernel_skips_masked_work`)."""

    def decide(row: pd.Series) -> bool:
        recorded = flag(row.get(SKIPS_MASKED_WORK))
        if recorded is not None:
            return recorded
        backend = row.get(SDPA_BACKEND)
        return flag(row.get(CAUSAL)) is True and kernel_skips_masked_work(
            backend if isinstance(backend, str) else "", str(row[IMPL])
        )

    return rows.apply(decide, axis=1).astype(bool) if len(rows) else pd.Series(dtype=bool, index=rows.index)


def _counted(rows: pd.DataFrame) -> pd.Series:
    """True where the row's roofline used the counted intensity (``intensity_source`` measured, a positive count)."""
    source = rows[INTENSITY_SOURCE] if INTENSITY_SOURCE in rows else pd.Series("", index=rows.index)
    return (source == "measured") & (numeric_column(rows, MEASURED_INTENSITY) > 0)


def executed(rows: pd.DataFrame) -> pd.DataFrame:
    """Per row: executed TFLOP/s, executed intensity, whether the kernel skips masked work, whether counted.

    A skipping row without useful FLOPs (a run older than those columns) has no executed figures (NaN) rather
    than the full count it did not execute."""
    skips = skips_masked_work(rows)
    is_counted = _counted(rows)
    achieved = numeric_column(rows, ACHIEVED_TFLOPS)
    intensity = numeric_column(rows, MEASURED_INTENSITY).where(is_counted, numeric_column(rows, ARITHMETIC_INTENSITY))
    rate = numeric_column(rows, ACHIEVED_USEFUL_TFLOPS).where(skips, achieved)
    # both rates share the latency, so their ratio is useful / all FLOPs of the row's source: the same bytes
    # under fewer FLOPs
    return pd.DataFrame(
        {
            EXECUTED_TFLOPS: rate,
            EXECUTED_INTENSITY: intensity.where(~skips, intensity * rate / achieved),
            SKIPS_MASKED_WORK: skips,
            COUNTED: is_counted,
        },
        index=rows.index,
    )
