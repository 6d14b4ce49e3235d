"""``kernels.csv`` in a run folder: per profiled kernel of each row's one call, its name, duration, bytes and FLOPs.

A row's hardware columns are sums over its kernels; this file keeps the kernels themselves, for whoever wants to
see which one is memory-bound (``mhabench report --kernels N`` shows a row's top ones). It is written only by a
run with ``counters: hardware`` on CUDA, one batch of lines per profiled case, keyed by ``case_id``, ``impl`` and
``repeat``.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

KERNELS_NAME = "kernels.csv"
KERNEL_COLUMNS = (
    "case_id",
    "impl",
    "repeat",
    "kernel",
    "kernel_name",
    "duration_ms",
    "dram_read_bytes",
    "dram_write_bytes",
    "l2_bytes",
    "tensor_flops",
    "fp32_flops",
)
"""``kernel``: the kernel's position in its call (0-based, launch order); bytes and FLOPs as the row's columns."""


def append_kernels(run_dir: Path, records: Sequence[Mapping[str, object]]) -> None:
    """Append ``records`` to the run's kernels.csv, writing the header when the file is new."""
    if not records:
        return
    path = run_dir / KERNELS_NAME
    new = not path.exists()
    with open(path, "a", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=KERNEL_COLUMNS, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(records)


def read_kernels(run_dir: Path) -> pd.DataFrame | None:
    """The run's kernels, or None when it profiled none."""
    path = run_dir / KERNELS_NAME
    return pd.read_csv(path) if path.is_file() else None


def top_kernels(kernels: pd.DataFrame, case_id: str, impl: str, repeat: int, count: int) -> pd.DataFrame:
    """The ``count`` longest kernels of one row's call, longest first."""
    mine = kernels[(kernels["case_id"] == case_id) & (kernels["impl"] == impl) & (kernels["repeat"] == repeat)]
    return mine.sort_values("duration_ms", ascending=False).head(count)
