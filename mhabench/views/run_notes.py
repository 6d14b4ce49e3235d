"""The lines under ``mhabench run``'s table: drift inside a case, a corrected roof, cases measured on more
than one device, torch's expected messages (each once), the legend.

A row's ``note`` holds what torch said while it was checked (:mod:`mhabench.measure.torch_messages`);
the same message on many rows is printed once, with the implementations it came from, so a sweep of
nested-SDPA cases says it in one line rather than in a screen of ``W1127`` lines. The legend names
the table's terms a newcomer looks up and points to the README's glossary.
"""

from __future__ import annotations

import pandas as pd

from mhabench.analysis.case_drift import CaseDrift, case_drifts
from mhabench.analysis.case_label import case_label
from mhabench.analysis.device_mix import run_device_mix
from mhabench.analysis.throughput import ROOF, needed_roof, stored_roof_source, throughput
from mhabench.measure.peaks import RoofSource
from mhabench.measure.torch_messages import messages_of
from mhabench.results.columns import IMPL, NOTE, PEAK_GBPS, PEAK_TFLOPS
from mhabench.views.device_mix import device_lines

LEGEND = "terms (paired speedup, CI, noisy, FLOP/B, roofline eff., counted vs modelled): README.md, Glossary"
"""One line under the run's table: the words a newcomer has to look up, and where they are explained."""


def lines_under_table(rows: pd.DataFrame) -> list[str]:
    """Drift inside a case (:mod:`mhabench.analysis.case_drift`), then torch's messages, each once."""
    return [*drift_lines(rows), *roof_lines(rows), *device_lines(run_device_mix(rows)), *note_lines(rows)]


def drift_lines(rows: pd.DataFrame) -> list[str]:
    """One line per case whose machine moved while it was timed (``rows`` with their raw samples)."""
    return [drift_line(drift) for drift in case_drifts(rows)]


def drift_line(drift: CaseDrift) -> str:
    """One line under the run's table: how the machine moved, and which medians cannot be compared."""
    way = "faster" if drift.change < 0 else "slower"
    percent = abs(1 / (1 + drift.change) - 1 if drift.change < 0 else drift.change) * 100
    line = (
        f"drift inside {drift.case}: `{drift.reference_impl}`'s last rounds ran {percent:.0f}% {way} than its first "
        f"({drift.rounds} rounds)"
    )
    if not drift.early:
        return line + "; the paired speedups cancel it"
    shorter = ", ".join(f"`{impl}` (rounds 1–{count})" for impl, count in drift.early)
    return (
        f"{line}; {shorter} timed in another stretch: their medians are not comparable with the others', "
        "but their paired speedups are, since each pairs only the rounds both rows ran in"
    )


def roof_lines(rows: pd.DataFrame) -> list[str]:
    """One line when the table judges rows against a corrected roof (:func:`~mhabench.analysis.throughput.roofs`):
    how many were re-probed or raised to a row, and which rows ran above the roof their own process probed (named,
    never as a figure over 100 %). A datasheet roof is never corrected."""
    if rows.empty:
        return []
    source = throughput(rows)[ROOF]
    counts = {word: int(source.eq(word).sum()) for word in (RoofSource.REPROBED, RoofSource.RAISED)}
    if not any(counts.values()):
        return []
    needed, probe = needed_roof(rows), rows.reindex(columns=[PEAK_TFLOPS, PEAK_GBPS]).apply(pd.to_numeric)
    above = rows[needed.gt(probe).any(axis=1) & stored_roof_source(rows).ne(RoofSource.DATASHEET)]
    named = [f"`{row[IMPL]}` at {case_label(row)}" for _, row in above.head(3).iterrows()]
    more = f" and {len(above) - 3} more" if len(above) > 3 else ""
    ran = (
        f"; {', '.join(named)}{more} ran above the roof {'its' if len(above) == 1 else 'their'} process probed"
        if named
        else ""
    )
    done = ", ".join(f"{count} {_rows(count)} {word}" for word, count in counts.items() if count)
    return [
        f"roof corrected ({done}){ran}: a probe reads slow on a busy machine, so roofline eff. is against the run's "
        "largest probe, or the fastest row where none reached it"
    ]


def _rows(count: int) -> str:
    return "row" if count == 1 else "rows"


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
