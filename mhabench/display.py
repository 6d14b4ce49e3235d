"""Terminal output: the progress bar while running and the summary tables (rich)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table


def human_bytes(n: float) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def human_count(n: float) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f}"


class RichProgress:
    """The runner's ``Progress``: a bar with ETA and the (case, implementation) being measured."""

    def __init__(self, console: Console) -> None:
        self._bar = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._task: Any = None

    def __enter__(self) -> RichProgress:
        self._bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.__exit__(*exc)

    def start(self, total: int) -> None:
        self._task = self._bar.add_task("measuring", total=total)

    def advance(self, label: str) -> None:
        self._bar.update(self._task, advance=1, description=label)


def _value(row: pd.Series, column: str) -> Any:
    """The cell, or None where the row has no value (a failed row has no latency)."""
    value = row.get(column)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def format_number(value: Any, spec: str, suffix: str = "") -> str:
    """``value`` formatted with ``spec``, or "-" where there is no finite number (failed rows, NaN, None)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "-"
    return f"{number:{spec}}{suffix}" if math.isfinite(number) else "-"


SUMMARY_COLUMNS = ("case", "impl", "median ms (IQR)", "speedup", "peak mem", "FLOP/B", "TFLOP/s", "rel err", "status")


def _summary_cells(row: pd.Series, baseline_ms: float | None, with_compile: bool) -> list[str]:
    latency = _value(row, "latency_ms")
    speedup = f"{baseline_ms / latency:.2f}×" if latency and baseline_ms else "-"
    spread = f"{latency:.3f} ({row['latency_p75_ms'] - row['latency_p25_ms']:.3f})" if latency else "-"
    status = "ok" if row["status"] == "ok" else f"[red]{row['status']}[/red] {row['error']}"
    if _value(row, "noisy"):
        status += " [yellow]noisy[/yellow]"
    cells = [
        str(row["impl"]),
        spread,
        speedup,
        human_bytes(_value(row, "peak_memory_bytes")),
        format_number(row.get("arithmetic_intensity"), ".1f"),
        format_number(row.get("achieved_tflops"), ".3f"),
        format_number(row.get("max_rel_err"), ".1e"),
    ]
    return [*cells, format_number(row.get("compile_time_s"), ".1f"), status] if with_compile else [*cells, status]


def case_label(row: pd.Series) -> str:
    """Short label of a case for narrow terminals: the shape, then what differs from the defaults."""
    kv_heads = row.get("kv_heads")
    extras = [f"kv={kv_heads}" if _value(row, "kv_heads") is not None and kv_heads != row["heads"] else ""]
    extras += [flag for flag in ("causal", "bias") if bool(row[flag])]
    extras += [str(row.get(field)) for field, default in (("mode", "forward"), ("phase", "prefill"))
               if row.get(field, default) != default]  # fmt: skip
    shape = f"n={row['seq_len']} h={row['heads']} d={row['d_model']} b={row['batch']} {row['dtype']}"
    return " ".join([shape, *(extra for extra in extras if extra)])


def summary_table(rows: pd.DataFrame, baseline: str = "naive") -> Table:
    """Per case: each implementation's median latency (IQR), speedup vs ``baseline``, memory, intensity, error.

    A "compile s" column appears when an implementation compiled on its first call.
    """
    with_compile = "compile_time_s" in rows and bool(rows["compile_time_s"].notna().any())
    headers = list(SUMMARY_COLUMNS)
    if with_compile:
        headers.insert(-1, "compile s")
    table = Table(title=f"mhabench run (speedup vs {baseline})")
    for header in headers:
        table.add_column(header, justify="left" if header in ("case", "impl", "status") else "right")
    for _, group in rows.groupby("case_id", sort=False):
        base = group.loc[group["impl"] == baseline, "latency_ms"].dropna()
        baseline_ms = float(base.iloc[0]) if len(base) else None
        for position, (_, row) in enumerate(group.iterrows()):
            label = case_label(row) if position == 0 else ""
            table.add_row(label, *_summary_cells(row, baseline_ms, with_compile))
        table.add_section()
    return table


def plan_table(rows: pd.DataFrame) -> Table:
    """``--dry-run``: the cases and their predicted cost, nothing run."""
    table = Table(title="mhabench run --dry-run (predicted, nothing measured)")
    for header in ("case", "impl", "FLOPs", "bytes moved", "FLOP/B", "predicted peak mem"):
        table.add_column(header, justify="left" if header in ("case", "impl") else "right")
    for _, row in rows.iterrows():
        table.add_row(
            str(row["case_id"]), str(row["impl"]), human_count(row["flops"]), human_bytes(row["bytes_moved"]),
            f"{row['arithmetic_intensity']:.1f}", human_bytes(row["predicted_peak_bytes"]),
        )  # fmt: skip
    return table
