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

**The roof** (:func:`roofs`) is never below work a row did. A probed roof (a CPU, an unknown GPU) is one reading of
one process; the run's processes probed the same machine, and a probe comes out slow on a busy machine, never
fast. So the rows of a run, device and dtype are judged against the largest figures any of its probes gave
(``re-probed`` where that is another process's), raised to the fastest row's own throughput where that is higher
still (``raised to row``). A datasheet roof stays as it is. The writer applies the same rule while a run goes
(:mod:`mhabench.run.roof`); this one corrects runs written before it, and the rows a process wrote before its
roof moved.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mhabench.analysis.executed import EXECUTED_INTENSITY, EXECUTED_TFLOPS, executed, numeric_column
from mhabench.impls import get_spec
from mhabench.impls.registry import available_implementations
from mhabench.measure.peaks import RoofSource
from mhabench.results.columns import (
    BYTES_MOVED,
    DEVICE_NAME,
    DTYPE,
    FLOPS,
    IMPL,
    LATENCY_MS,
    PEAK_GBPS,
    PEAK_TFLOPS,
    ROOF_SOURCE,
    ROOFLINE_SOURCE,
    RUN_ID,
    TENSOR_PARALLEL,
    USEFUL_FLOPS,
)

USEFUL_TFLOPS = "useful_tflops"
USEFUL_INTENSITY = "useful_intensity"
USEFUL_ATTAINABLE_TFLOPS = "useful_attainable_tflops"
USEFUL_EFFICIENCY = "useful_efficiency"
EXECUTED_OVER_USEFUL = "executed_over_useful"
USEFUL_BOUND = "useful_bound"
ROOF = "roof"
"""How the roof these figures are judged against was obtained (a :class:`~mhabench.measure.peaks.RoofSource`
word): the stored ``roof_source``, or ``re-probed`` / ``raised to row`` where :func:`roofs` corrected it."""


def useful_flops(rows: pd.DataFrame) -> pd.Series:
    """The model's useful FLOPs; a run older than that column has all its FLOPs (the same without a mask)."""
    return numeric_column(rows, USEFUL_FLOPS).fillna(numeric_column(rows, FLOPS))


ROOF_GROUP = (RUN_ID, DEVICE_NAME, DTYPE, TENSOR_PARALLEL)
"""Rows that share one machine's roof: the probes of a run's processes on one device, dtype and group size (and
compute dtype, :func:`_compute_dtypes`)."""


def stored_roof_source(rows: pd.DataFrame) -> pd.Series:
    """Each row's ``roof_source``; in a run written before that column, datasheet or probed as its
    ``roofline_source`` says; empty for a row without a roof (a failed one)."""
    missing = pd.Series(None, index=rows.index, dtype=object)
    stored = rows[ROOF_SOURCE].where(rows[ROOF_SOURCE].astype(str).ne("")) if ROOF_SOURCE in rows else missing
    described = rows.get(ROOFLINE_SOURCE, missing)
    sheet = described.astype(str).str.startswith("datasheet")
    older = pd.Series(np.where(sheet, RoofSource.DATASHEET.value, RoofSource.PROBED.value), index=rows.index)
    older = older.where(described.notna() & described.astype(str).ne(""))
    return stored.where(stored.notna(), older)


COMPUTE_DTYPE = "compute_dtype"


def _compute_dtypes(rows: pd.DataFrame) -> pd.Series:
    """The dtype each row's implementation computes in where it has one of its own (``fused_fp8``: its own roof
    inside a bf16 case), else empty: rows on different compute rates never share a roof."""
    if IMPL not in rows:
        return pd.Series("", index=rows.index)
    known = set(available_implementations())
    own = {impl: str(get_spec(impl).compute_dtype or "") if impl in known else "" for impl in rows[IMPL].unique()}
    return rows[IMPL].map(own).fillna("")


def needed_roof(rows: pd.DataFrame) -> pd.DataFrame:
    """Per row, the least compute peak (TFLOP/s) and bandwidth (GB/s) under which its useful and its executed
    point both lie: a roof lower in either figure is below work the row did."""
    useful_tflops = useful_flops(rows) / (numeric_column(rows, LATENCY_MS) / 1e3) / 1e12
    useful_gbps = numeric_column(rows, BYTES_MOVED) / (numeric_column(rows, LATENCY_MS) / 1e3) / 1e9
    done = executed(rows)
    executed_gbps = done[EXECUTED_TFLOPS] / done[EXECUTED_INTENSITY] * 1e3
    return pd.DataFrame(
        {
            PEAK_TFLOPS: np.fmax(useful_tflops, done[EXECUTED_TFLOPS]),
            PEAK_GBPS: np.fmax(useful_gbps.where(useful_tflops.notna()), executed_gbps),
        },
        index=rows.index,
    )


def roofs(rows: pd.DataFrame) -> pd.DataFrame:
    """Per row the roof its efficiency is judged against (``PEAK_TFLOPS``, ``PEAK_GBPS``) and how it was obtained
    (``ROOF_SOURCE``): the stored one for a datasheet roof; for a probed one the largest of its group's probes
    (:data:`ROOF_GROUP`), raised to the group's fastest work where that is higher."""
    out = pd.DataFrame(
        {
            PEAK_TFLOPS: numeric_column(rows, PEAK_TFLOPS),
            PEAK_GBPS: numeric_column(rows, PEAK_GBPS),
            ROOF_SOURCE: stored_roof_source(rows),
        },
        index=rows.index,
    )
    placed = out[PEAK_TFLOPS].gt(0) & out[PEAK_GBPS].gt(0)
    out[ROOF_SOURCE] = out[ROOF_SOURCE].where(placed)  # a row without a roof has no roof source
    probed = out[ROOF_SOURCE].ne(RoofSource.DATASHEET) & placed
    if not probed.any():
        return out
    work, keys = needed_roof(rows), [key for key in ROOF_GROUP if key in rows]
    shared = rows.loc[probed, keys].astype(str).assign(**{COMPUTE_DTYPE: _compute_dtypes(rows.loc[probed])})
    group = _group_codes(shared)
    peaks = out.loc[probed, [PEAK_TFLOPS, PEAK_GBPS]]
    best = _group_max(peaks, group)
    needed = _group_max(work.loc[probed, [PEAK_TFLOPS, PEAK_GBPS]], group)
    raised = needed.gt(best).any(axis=1)  # both are their group's, so this is the group's answer on each row
    lower = peaks.lt(best).any(axis=1)
    out.loc[probed, [PEAK_TFLOPS, PEAK_GBPS]] = np.fmax(best, needed).to_numpy()
    out.loc[raised[raised].index, ROOF_SOURCE] = RoofSource.RAISED.value
    out.loc[lower[lower & ~raised].index, ROOF_SOURCE] = RoofSource.REPROBED.value
    return out


def _group_codes(keys: pd.DataFrame) -> np.ndarray:
    """Each row's group as a number: rows with equal values in every column of ``keys`` share one."""
    numbers: dict[tuple[object, ...], int] = {}
    rows = zip(*(keys[column].tolist() for column in keys.columns), strict=True)
    return np.array([numbers.setdefault(key, len(numbers)) for key in rows], dtype=np.intp)


def _group_max(values: pd.DataFrame, group: np.ndarray) -> pd.DataFrame:
    """Per row and column, the largest value of its group, NaN ignored (NaN where the whole group is NaN): pandas'
    ``groupby(...).transform("max")``, without its cost per call on a run's few rows."""
    numbers = values.to_numpy(dtype=float)
    largest = np.full((int(group.max()) + 1 if len(group) else 0, numbers.shape[1]), np.nan)
    np.fmax.at(largest, group, numbers)
    return pd.DataFrame(largest[group], index=values.index, columns=values.columns)


def with_roofs(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with their roof columns (``peak_tflops``, ``peak_gbps``, ``roof_source``) as :func:`roofs` corrects
    them: for a view that keeps a subset of a run's rows (one process's row per case, a plot's points) and must
    judge them against the roof the whole run shows. Applying it twice changes nothing."""
    return rows.assign(**{name: values for name, values in roofs(rows).items()})


def throughput(rows: pd.DataFrame, roofed: bool = False) -> pd.DataFrame:
    """Per row: useful TFLOP/s, useful intensity, the roof there, efficiency, executed over useful FLOPs, bound, and
    how the roof was obtained (:func:`roofs`; ``roofed``: the rows already carry :func:`with_roofs`'s columns, taken
    from their whole run, so they are not corrected again)."""
    useful = useful_flops(rows)
    latency_s = numeric_column(rows, LATENCY_MS) / 1e3
    rate = useful / latency_s / 1e12
    intensity = useful / numeric_column(rows, BYTES_MOVED)
    roof = rows[[PEAK_TFLOPS, PEAK_GBPS, ROOF_SOURCE]] if roofed else roofs(rows)
    peak_tflops, peak_gbps = roof[PEAK_TFLOPS], roof[PEAK_GBPS]
    attainable = np.minimum(peak_tflops, intensity * peak_gbps / 1e3)
    ridge = peak_tflops * 1e3 / peak_gbps
    bound = pd.Series(np.where(intensity < ridge, "memory", "compute"), index=rows.index).where(
        intensity.notna() & ridge.notna()
    )
    efficiency = rate / attainable
    # a roof raised to a row's own rate: that row is at the roof, not a rounding error above it
    efficiency = efficiency.where(roof[ROOF_SOURCE].ne(RoofSource.RAISED), np.fmin(efficiency, 1.0))
    return pd.DataFrame(
        {
            USEFUL_TFLOPS: rate,
            USEFUL_INTENSITY: intensity,
            USEFUL_ATTAINABLE_TFLOPS: attainable,
            USEFUL_EFFICIENCY: efficiency,
            EXECUTED_OVER_USEFUL: executed(rows)[EXECUTED_TFLOPS] / rate,
            USEFUL_BOUND: bound,
            ROOF: roof[ROOF_SOURCE],
        },
        index=rows.index,
    )
