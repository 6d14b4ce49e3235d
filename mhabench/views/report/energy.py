"""The report's "Energy" section: J/call, tokens/J and average power of every ok row NVML resolved.

Only a CUDA run read through NVML has one. A row's figures are shown only under the rule of
:mod:`mhabench.results.energy`, applied again on reading, so an older run's block readings (up to 1,580 W on a
700 W H100) are counted as unresolved with their reason, never printed as energy.
"""

from __future__ import annotations

from collections import Counter

from mhabench.analysis.case_label import case_label
from mhabench.results.energy import EnergyReading, power_limit_of, reading
from mhabench.results.schema import RowStatus
from mhabench.results.store import Run
from mhabench.views.report.blocks import Block, Heading, Paragraph
from mhabench.views.table import TableModel, format_number

REASONS_SHOWN = 3


def energy_blocks(run: Run) -> list[Block]:
    """The section, or nothing for a run no row of which was read through NVML (a CPU run)."""
    if not any(row.energy and str(row.energy.energy_source or "").startswith("nvml") for row in run.rows):
        return []
    limit = power_limit_of(run.manifest.environment)
    ok = [row.record() for row in run.rows if row.status == RowStatus.OK]
    shown = [(record, reading(record, limit)) for record in ok]
    resolved = [(record, one) for record, one in shown if one.resolved]
    blocks: list[Block] = [
        Heading("Energy"),
        Paragraph(
            "GPU energy per call from each row's own NVML windows after its timing (calls back to back, each window "
            "from one energy-counter step to another); a row counts only with a window of at least 1 s and an "
            f"average power within the power limit ({format_number(limit, '.0f')} W) × 1.02."
        ),
    ]
    if resolved:
        blocks.append(_table(resolved))
    unresolved = Counter(one.unresolved_kind for _, one in shown if not one.resolved)
    if unresolved:
        reasons = " ".join(f"{count} × {kind}." for kind, count in unresolved.most_common(REASONS_SHOWN))
        more = len(unresolved) - REASONS_SHOWN
        tail = f" {more} other reason(s)." if more > 0 else ""
        blocks.append(Paragraph(f"{sum(unresolved.values())} ok row(s) without energy: {reasons}{tail}"))
    return blocks


def _table(resolved: list[tuple[dict[str, object], EnergyReading]]) -> TableModel:
    headers = ["case", "impl", "J/call", "tokens/J", "power W", "window s", "± energy"]
    cells = [
        [
            case_label(record),
            str(record.get("impl")),
            format_number(one.energy_per_call_j, ".4g"),
            format_number(one.tokens_per_joule, ",.0f"),
            format_number(one.average_power_w, ".0f"),
            format_number(one.window_s, ".2f"),
            format_number(one.uncertainty, ".1%"),
        ]
        for record, one in resolved
    ]
    numeric = [False, False, True, True, True, True, True]
    groups = [case_label(record) for record, _ in resolved]
    return TableModel("Energy per call (resolved rows)", headers, cells, numeric, groups=groups)
