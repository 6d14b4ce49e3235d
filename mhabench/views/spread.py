"""The table of ``mhabench spread``: per case and implementation, every run's speedup and the spreads."""

from __future__ import annotations

import math

import pandas as pd

from mhabench.results.columns import IMPL
from mhabench.views.table import TableModel, format_number


def spread_table(spread: pd.DataFrame, baseline: str) -> TableModel:
    """``spread`` as :func:`mhabench.analysis.spread.speedup_spread` gives it; the records leave out the
    per-repeat lists (one cell of a CSV cannot hold a list)."""
    cells = [
        [
            line["case"],
            line[IMPL],
            str(line["repeats"]),
            " / ".join(format_number(v, ".2f") for v in line["speedup_by_repeat"]),
            _percent(line["speedup_spread"]),
            _percent(line["latency_spread"]),
        ]
        for line in spread.to_dict("records")
    ]
    return TableModel(
        title=f"run-to-run spread of the speedup over {baseline}: (max − min) / median",
        headers=["case", "impl", "runs", "speedup per run", "speedup spread", "latency spread"],
        cells=cells,
        numeric=[False, False, True, True, True, True],
        groups=[line[0] for line in cells],
        records=spread.drop(columns=["latency_ms_by_repeat", "speedup_by_repeat"]),
    )


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %" if value is not None and math.isfinite(value) else "-"
