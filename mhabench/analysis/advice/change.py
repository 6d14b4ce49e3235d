"""What to change: a head count (so a head size) or a key/value head count on the same sweep that is
faster at the same width, with the rows that show it.

Along ``heads`` (d_model fixed: the same width, d_k = d_model / h) or ``kv_heads`` (grouped-query
attention; at decode, with the KV cache each needs), each point's best is its fastest row that passed
its check. Different cases were timed in different rounds, so the comparison is the ratio of medians
with an unpaired interval, and each other value stands by the pick's rule: clearly slower (interval
above 1, a lead of at least ``TIE_MARGIN``), tied, or, with no interval, cannot tell. Only what the
run measured is compared: no value outside the sweep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mhabench.analysis.advice.cases import MeasuredCase, Row, lines_along, swept
from mhabench.analysis.advice.pick import SLOWER, fastest_first, median_ms, standing
from mhabench.analysis.estimate import is_ok, samples_of
from mhabench.analysis.statement import CHANGE, Statement
from mhabench.analysis.stats import ratio_of_medians
from mhabench.results.cells import number
from mhabench.results.columns import D_MODEL, HEAD_DIM, HEADS, IMPL, KV_CACHE_BYTES, KV_HEADS, LATENCY_MS, PHASE

CHANGE_AXES = (HEADS, KV_HEADS)


def changes(cases: Sequence[MeasuredCase]) -> list[Statement]:
    """One statement per line along a head-count axis where at least two points ran."""
    statements = []
    for axis in (axis for axis in CHANGE_AXES if axis in swept(cases)):
        for fixed, line in lines_along(cases, axis):
            best = [(case, row) for case in line if (row := fastest_row(case)) is not None]
            if len(best) > 1:
                statements.append(_line(axis, fixed, best))
    return statements


def fastest_row(case: MeasuredCase) -> Row | None:
    """The case's fastest row that passed its check (lowest median), None when none did."""
    ok = fastest_first(row for row in case.rows if is_ok(row))
    return ok[0] if ok else None


def _line(axis: str, fixed: list[tuple[str, Any]], best: Sequence[tuple[MeasuredCase, Row]]) -> Statement:
    top_case, top_row = min(best, key=lambda pair: median_ms(pair[1]))
    leads = {case.case_id: ratio_of_medians(samples_of(row), samples_of(top_row)) for case, row in best}
    others = [(case, row) for case, row in best if case is not top_case]
    states = {case.case_id: standing(leads[case.case_id], top_row, row) for case, row in others}
    figures = _figures(axis, top_case, top_row, best, leads, states)
    width = [] if any(name == D_MODEL for name, _ in fixed) else [(D_MODEL, top_case.fields[D_MODEL])]
    figures["fixed"] = dict([*width, *fixed])  # d_model named even where the group never varies it
    figures["decode"] = top_case.fields.get(PHASE) == "decode"
    figures["clear"] = any(state == SLOWER for state in states.values())
    return Statement(CHANGE, f"{axis}_change", top_case.group, axis, figures)


def _figures(
    axis: str,
    top_case: MeasuredCase,
    top_row: Row,
    best: Sequence[tuple[MeasuredCase, Row]],
    leads: Mapping[str, Any],
    states: Mapping[str, str],
) -> dict[str, Any]:
    return {
        "axis": axis,
        "fastest_value": top_case.fields[axis],
        "fastest_impl": str(top_row[IMPL]),
        "points": [
            {
                "value": case.fields[axis],
                "impl": str(row[IMPL]),
                "latency_ms": number(row, LATENCY_MS),
                "slower_by": leads[case.case_id].ratio,
                "ci_low": leads[case.case_id].ci_low,
                "ci_high": leads[case.case_id].ci_high,
                "clearly_slower": states.get(case.case_id) == SLOWER,
                "standing": states.get(case.case_id, "fastest"),
                "kv_cache_bytes": number(row, KV_CACHE_BYTES),
                "head_dim": number(row, HEAD_DIM),
            }
            for case, row in best
        ],
    }
