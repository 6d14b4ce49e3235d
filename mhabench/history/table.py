"""The history as people and machines read it: tables (terminal, Markdown) and JSON.

The points table has one line per point of each series (commit order, runs pooled, interval); the
changes table one line per change point (commit range, size, interval, verdict, and the environment
diff where a series hands over to a new fingerprint).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from mhabench.analysis.verdict import Change
from mhabench.history.gate import GateResult
from mhabench.history.series import History, Point, Series, Step
from mhabench.views.table import TableModel, format_number

STYLE = {Change.SLOWER: "slower", Change.FASTER: "faster", Change.SAME: "same", Change.UNCLEAR: "maybe"}


def _interval(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "—"
    return f"{format_number(low, '.4g')}–{format_number(high, '.4g')}"


def points_table(history: History) -> TableModel:
    """Every series, its points in commit order."""
    cells, groups = [], []
    for series in history.series:
        for point in series.points:
            cells.append(
                [
                    series.case,
                    series.impl_label,
                    series.fingerprint.key,
                    point.label,
                    str(len(point.runs)),
                    format_number(point.value, ".4g"),
                    _interval(point.low, point.high),
                ]
            )
            groups.append(series.name)
    metric = history.metric
    return TableModel(
        title=f"history: {metric.name} ({metric.description}, {metric.unit})",
        headers=["case", "impl", "fingerprint", "commit", "runs", metric.name, "95% interval"],
        cells=cells,
        numeric=[False, False, False, False, True, True, False],
        groups=groups,
    )


def _environment_text(step: Step) -> str:
    return "; ".join(f"{name} {old} → {new}" for name, (old, new) in step.environment.items())


def change_rows(history: History) -> list[tuple[Series, Step, str]]:
    """Each change point with the series it belongs to and its cause (a commit range or an environment diff)."""
    rows = [
        (series, step, f"commits {step.before}..{step.after}") for series in history.series for step in series.steps
    ]
    rows += [(new, step, f"environment: {_environment_text(step)}") for _, new, step in history.handovers]
    return rows


def changes_table(history: History) -> TableModel:
    """Every change point and fingerprint change, each with its cause, size, interval and verdict."""
    rows = change_rows(history)
    return TableModel(
        title="change points (L1 piecewise-constant fit with a penalty; fingerprint changes)",
        headers=["case", "impl", "fingerprint", "cause", "size (after/before)", "95% interval", "verdict"],
        cells=[
            [
                series.case,
                series.impl_label,
                series.fingerprint.key,
                cause,
                f"{step.size:.3f}×",
                _interval(step.low, step.high),
                step.change.value,
            ]
            for series, step, cause in rows
        ],
        numeric=[False, False, False, False, True, False, False],
        styles=[STYLE[step.change] for _, step, _ in rows],
    )


def fingerprints_table(history: History) -> TableModel:
    """What each fingerprint key stands for."""
    seen = {series.fingerprint.key: series.fingerprint for series in history.series}
    return TableModel(
        title="fingerprints",
        headers=["fingerprint", "environment"],
        cells=[[key, fingerprint.describe()] for key, fingerprint in seen.items()],
        numeric=[False, False],
    )


def _point_json(point: Point) -> dict[str, Any]:
    return {
        "commit": point.commit,
        "dirty": point.dirty,
        "value": point.value,
        "ci_low": _finite(point.low),
        "ci_high": _finite(point.high),
        "runs": list(point.runs),
    }


def _step_json(step: Step) -> dict[str, Any]:
    data = dataclasses.asdict(step)
    data.update(change=step.change.value, low=_finite(step.low), high=_finite(step.high))
    data["environment"] = {name: list(values) for name, values in step.environment.items()}
    return data


def to_json(history: History, gate: list[GateResult] | None = None) -> str:
    """Everything the tables show, plus the gate's verdicts, for CI scripts that read rather than parse text."""
    data: dict[str, Any] = {
        "metric": dataclasses.asdict(history.metric),
        "method": "L1 piecewise-constant fit with a penalty (asv step_detect), on log values",
        "series": [
            {
                "case_id": series.case_id,
                "case": series.case,
                "impl": series.impl,
                "baseline": series.baseline or None,
                "fingerprint": {"key": series.fingerprint.key, **dataclasses.asdict(series.fingerprint)},
                "points": [_point_json(point) for point in series.points],
                "steps": [_step_json(step) for step in series.steps],
            }
            for series in history.series
        ],
        "fingerprint_changes": [
            {"case_id": new.case_id, "impl": new.impl, "from": old.fingerprint.key, "to": new.fingerprint.key}
            | _step_json(step)
            for old, new, step in history.handovers
        ],
    }
    if gate is not None:
        data["gate"] = [_gate_json(result) for result in gate]
    return json.dumps(data, indent=2)


def _gate_json(result: GateResult) -> dict[str, Any]:
    return {
        "series": result.series.name,
        "commit": result.newest.commit,
        "size": _finite(result.size),
        "ci_low": _finite(result.low),
        "ci_high": _finite(result.high),
        "spread": _finite(result.spread),
        "verdict": result.change.value if result.change else None,
        "regression": result.regression,
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
