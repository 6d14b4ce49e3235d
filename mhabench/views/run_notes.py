"""The lines under ``mhabench run``'s table: drift inside a case, rows above a measured roof, cases measured on more
than one device, torch's expected messages (each once), the legend.

A row's ``note`` holds what torch said while it was checked (:mod:`mhabench.measure.torch_messages`);
the same message on many rows is printed once, with the implementations it came from, so a sweep of
nested-SDPA cases says it in one line rather than in a screen of ``W1127`` lines. The legend names
the table's terms a newcomer looks up and points to the README's glossary.
"""

from __future__ import annotations

import pandas as pd

from mhabench.analysis.case_drift import case_drifts, drift_line
from mhabench.analysis.case_label import case_label
from mhabench.analysis.device_mix import run_device_mix
from mhabench.analysis.throughput import USEFUL_EFFICIENCY, as_in_table, throughput
from mhabench.measure.torch_messages import messages_of
from mhabench.results.columns import IMPL, NOTE, ROOFLINE_SOURCE
from mhabench.views.device_mix import device_lines

LEGEND = "terms (paired speedup, CI, noisy, FLOP/B, roofline eff., counted vs modelled): README.md, Glossary"
"""One line under the run's table: the words a newcomer has to look up, and where they are explained."""


def lines_under_table(rows: pd.DataFrame) -> list[str]:
    """Drift inside a case (:mod:`mhabench.analysis.case_drift`), then torch's messages, each once."""
    return [*drift_lines(rows), *above_roof_lines(rows), *device_lines(run_device_mix(rows)), *note_lines(rows)]


def drift_lines(rows: pd.DataFrame) -> list[str]:
    """One line per case whose machine moved while it was timed (``rows`` with their raw samples)."""
    return [drift_line(drift) for drift in case_drifts(rows)]


def above_roof_lines(rows: pd.DataFrame) -> list[str]:
    """One line when rows ran above a *measured* roof (roofline eff. over 100 %): that roof was probed once, at the
    process's start, and the machine's speed moved since (a loaded VM), so their efficiency reads high. A datasheet
    roof is not probed: a row above it is a cost-model question, which advise's "Model disagreements" asks."""
    if ROOFLINE_SOURCE not in rows or rows.empty:
        return []
    efficiency = throughput(rows)[USEFUL_EFFICIENCY]
    above = rows[(efficiency > 1.0) & rows[ROOFLINE_SOURCE].astype(str).str.startswith("measured")]
    if above.empty:
        return []
    named = [
        f"`{row[IMPL]}` at {case_label(row)} ({as_in_table(efficiency[index], USEFUL_EFFICIENCY)})"
        for index, row in above.head(3).iterrows()
    ]
    more = f" and {len(above) - 3} more" if len(above) > 3 else ""
    return [
        f"above the measured roof: {', '.join(named)}{more}: the roof was probed once, at the process's start, and the "
        "machine's speed moved since; roofline eff. above 100 % says the probe ran slow, not that a row beat the roof"
    ]


def note_lines(rows: pd.DataFrame) -> list[str]:
    """``torch said (sdpa_nested, 2 rows): …``: each distinct message once (its first sentence), with the
    implementations and the number of rows that carry it; the whole message is in the row's ``note``."""
    if NOTE not in rows:
        return []
    seen: dict[str, list[str]] = {}
    for note, impl in zip(rows[NOTE].fillna("").astype(str), rows[IMPL].astype(str), strict=True):
        for message in messages_of(note):
            seen.setdefault(message, []).append(impl)
    return [
        f"torch said ({', '.join(dict.fromkeys(impls))}, {len(impls)} row{'s' if len(impls) > 1 else ''}): "
        f"{_first_sentence(message)}"
        for message, impls in seen.items()
    ]


def _first_sentence(message: str) -> str:
    """Up to the first full stop: torch's advice after it (``We recommend …``) is in the row's note."""
    head, dot, rest = message.partition(". ")
    return f"{head}{dot.strip()}" + (" …" if rest else "")
