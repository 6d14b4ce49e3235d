"""Energy per call where NVML resolved it: one statement per case, its ok rows' J/call, tokens/J and power.

Energy is read from a row's own windows (``energy: windows``); a figure counts only under the rule of
:mod:`mhabench.results.energy` (a window of at least 1 s, average power within the power limit × 1.02), which
is applied here again, so a run written before that rule (whose blocks read up to 1,580 W on a 700 W H100)
says nothing about energy rather than something wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mhabench.analysis.advice import wording
from mhabench.analysis.advice.cases import MeasuredCase
from mhabench.analysis.advice.statement import ENERGY, Statement
from mhabench.analysis.speedup import is_ok
from mhabench.results.columns import IMPL
from mhabench.results.energy import EnergyReading, power_limit_of, reading

PER_CALL = "energy per call"


def energy_statements(cases: Sequence[MeasuredCase], environment: Mapping[str, Any]) -> list[Statement]:
    """Per case with at least one resolved row: those rows' energy, lowest J/call first."""
    limit = power_limit_of(environment)
    statements = []
    for case in cases:
        shown = [(str(row[IMPL]), reading(row, limit)) for row in case.rows if is_ok(row)]
        resolved = sorted(((impl, one) for impl, one in shown if one.resolved), key=lambda item: _joules(item[1]))
        if resolved:
            statements.append(_statement(case, resolved))
    return statements


def _joules(one: EnergyReading) -> float:
    assert one.energy_per_call_j is not None
    return one.energy_per_call_j


def _statement(case: MeasuredCase, resolved: list[tuple[str, EnergyReading]]) -> Statement:
    parts = [f"{wording.impl(impl)} {_figures(one)}" for impl, one in resolved]
    sentence = f"{case.label}: {PER_CALL} (NVML windows, back-to-back calls): " + "; ".join(parts) + "."
    figures = {
        impl: {
            "energy_per_call_j": one.energy_per_call_j,
            "tokens_per_joule": one.tokens_per_joule,
            "average_power_w": one.average_power_w,
            "energy_window_s": one.window_s,
            "energy_uncertainty": one.uncertainty,
        }
        for impl, one in resolved
    }
    rows = tuple(case.ref(impl) for impl, _ in resolved)
    return Statement(ENERGY, PER_CALL, case.group, case.label, sentence, figures, rows)


def _figures(one: EnergyReading) -> str:
    """``0.301 J (13,600 tokens/J, 655 W; ±5 % over 2 s windows)``."""
    tokens = f"{one.tokens_per_joule:,.0f} tokens/J, " if one.tokens_per_joule is not None else ""
    error = f"±{one.uncertainty:.0%} " if one.uncertainty is not None else ""
    window = f"{error}over {one.window_s:.2g} s windows" if one.window_s is not None else ""
    return f"{one.energy_per_call_j:.3g} J ({tokens}{one.average_power_w:.0f} W; {window})"
