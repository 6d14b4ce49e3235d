"""One line per case: the winner over its repeats, for the compact run summary of a large sweep."""

from __future__ import annotations

import collections
import math
from typing import Any

import pandas as pd

from mhabench.analysis.speedup import DEFAULT_BASELINE, Row, best, speedup_rows
from mhabench.analysis.spread import repeat_count, spread_of
from mhabench.results.columns import CASE_ID, IMPL, LATENCY_MS, STATUS
from mhabench.results.schema import RowStatus


def case_winners(frame: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> pd.DataFrame:
    """Per case: the winner over its repeats ("" when no row is ok), its median latency and speedup (with
    the CI when there is one repeat), the method, the speedup's run-to-run spread, the rows by status."""
    speedups = speedup_rows(frame, baseline)
    spread = {(line[CASE_ID], line[IMPL]): line for line in spread_of(speedups).to_dict("records")}
    by_case: dict[Any, list[Row]] = {}
    for row in speedups.to_dict("records"):
        by_case.setdefault(row[CASE_ID], []).append(row)
    single_repeat = repeat_count(frame) == 1
    return pd.DataFrame([_case_line(rows, spread, single_repeat) for rows in by_case.values()])


def _case_line(rows: list[Row], spread: dict[tuple[Any, Any], Row], single_repeat: bool) -> dict[str, Any]:
    case_id = rows[0][CASE_ID]
    candidates = {row[IMPL]: spread[case_id, row[IMPL]] for row in rows if (case_id, row[IMPL]) in spread}
    winner = best(
        {impl: c["speedup"] for impl, c in candidates.items()},
        {impl: c[LATENCY_MS] for impl, c in candidates.items()},
    )
    line = {
        CASE_ID: case_id,
        "case": rows[0]["case"],
        "winner": "",
        LATENCY_MS: math.nan,
        "speedup": math.nan,
        "speedup_ci_low": math.nan,
        "speedup_ci_high": math.nan,
        "speedup_method": "",
        "speedup_spread": math.nan,
        "repeats": 0,
        "statuses": dict(collections.Counter(row[STATUS] for row in rows)),
    }
    if winner is None:
        return line
    top, won = candidates[winner], [row for row in rows if row[IMPL] == winner and row[STATUS] == RowStatus.OK]
    return {
        **line,
        "winner": winner,
        LATENCY_MS: top[LATENCY_MS],
        "speedup": top["speedup"],
        "speedup_ci_low": won[0]["speedup_ci_low"] if single_repeat else math.nan,
        "speedup_ci_high": won[0]["speedup_ci_high"] if single_repeat else math.nan,
        "speedup_method": "+".join(sorted({str(row["speedup_method"]) for row in won if row["speedup_method"]})),
        "speedup_spread": top["speedup_spread"],
        "repeats": top["repeats"],
    }
