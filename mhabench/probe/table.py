"""The verdict table: one :class:`mhabench.views.table.TableModel` for the terminal, report.md and report.html.

It is built from claims.csv records (or the equal :class:`ClaimRow` dicts of a run just finished), so
the terminal and the report always show the same cells.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from mhabench.probe.claims import FAIL, INFO, NO_GUARANTEE, PASS, UNTESTABLE
from mhabench.results.cells import number_of
from mhabench.views.table import TableModel

HEADERS = ("case", "verdict", "claim", "theory", "measured ± sd", "tolerance", "source", "note")
NUMERIC = (False, False, False, True, True, False, False, False)
VERDICT_STYLES = {PASS: "", FAIL: "failed", NO_GUARANTEE: "maybe", INFO: "same", UNTESTABLE: "only"}
"""Verdict → row style of :data:`mhabench.views.table.RICH_STYLES` (red, yellow, dim, magenta)."""


def format_value(value: Any) -> str:
    """4 significant digits, whole numbers with thousands separators, text as it is, "—" for nothing."""
    number = number_of(value)
    if number is None:
        return "—" if value in (None, "") or (isinstance(value, float) and math.isnan(value)) else str(value)
    if number == int(number) and abs(number) < 1e15:
        return f"{int(number):,}"
    return f"{number:.4g}"


def _measured(record: Mapping[str, Any]) -> str:
    sd = number_of(record.get("sd"))
    measured = format_value(record.get("measured"))
    return f"{measured} ± {format_value(sd)}" if sd else measured


def verdict_table(records: Sequence[Mapping[str, Any]], title: str = "claims") -> TableModel:
    """Rows in file order; the terminal shows each case once, with a line between cases."""
    cells = [
        [
            str(r["case"]),
            str(r["verdict"]),
            str(r["statement"]),
            format_value(r.get("theory")),
            _measured(r),
            str(r["tolerance"]),
            str(r["source"]),
            str(r.get("note") or ""),
        ]
        for r in records
    ]
    styles = [VERDICT_STYLES.get(str(r["verdict"]), "") for r in records]
    return TableModel(title, HEADERS, cells, NUMERIC, styles, [r["case"] for r in records])


def verdict_counts(records: Sequence[Mapping[str, Any]]) -> str:
    """ "37 claims: 20 PASS, 3 FAIL, …" in the order PASS, FAIL, NO-GUARANTEE, INFO, UNTESTABLE."""
    counts = Counter(str(r["verdict"]) for r in records)
    parts = [f"{counts[v]} {v}" for v in (PASS, FAIL, NO_GUARANTEE, INFO, UNTESTABLE) if counts[v]]
    return f"{len(records)} claims: " + ", ".join(parts)
