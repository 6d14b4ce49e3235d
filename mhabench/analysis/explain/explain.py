"""Why each implementation slower than a case's fastest is slower, stage by stage (docs/stages.md).

Per row slower than its case's fastest, or any row asked about (the fastest included): its breakdown (the row's
``stage_breakdown``, or derived from the run's kernels.csv where the run profiled kernels and the row holds none,
a run recorded before breakdowns existed), the stage that costs most beyond the fastest row's (stages grouped so a
fused attention kernel compares with scores + softmax + P·V), how far that stage's FLOPs and bytes are from the
cost model's, the dtype it computes in where that is wider than its case's, and what a rule of
:mod:`mhabench.analysis.explain.rules` says of it. Nothing runs: everything comes from the run folder.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from mhabench.analysis.advice import wording
from mhabench.analysis.advice.answers import RunAnswers, answer
from mhabench.analysis.advice.cases import MeasuredCase
from mhabench.analysis.advice.pick import CANNOT_TELL, SLOWER, lead, standing
from mhabench.analysis.advice.thresholds import TIE_MARGIN
from mhabench.analysis.advice.why import row_case
from mhabench.analysis.explain.rules import REMEDIES, departs, first_match
from mhabench.errors import InputError, UnknownImplementationError
from mhabench.impls.registry import get_spec
from mhabench.measure.stages import breakdown, kernel_units
from mhabench.results.kernels import read_kernels
from mhabench.results.schema import RowStatus
from mhabench.results.stages import StageFigures, read_breakdown
from mhabench.results.store import Run
from mhabench.stage_cost import STAGE_LABELS, stage_costs

FAMILY = {"scores": "attention", "mask_softmax": "attention", "pv": "attention"}
"""Stages compared as one across implementations: a fused kernel does the work of all three."""


@dataclasses.dataclass(frozen=True)
class Explanation:
    """Why one row is slower than its case's pick: the stage named, its figures, and the sentence."""

    case_id: str
    case_label: str
    impl: str
    pick: str
    slower_by: float
    source: str
    stage: StageFigures | None
    rule: str
    text: str
    stages: tuple[StageFigures, ...]
    standing: str = "clearly slower"
    """How the row stands against the case's fastest: ``clearly slower``, ``cannot tell`` (slower by its median
    only), ``tied``, or ``pick`` (the fastest, asked about)."""

    @property
    def short(self) -> str:
        """The stage and its departure in one clause, for advise (``70 % of its time in the QKV projection, …``)."""
        if self.stage is None:
            return ""
        return f"{_share(self.stage)} of its time in the {STAGE_LABELS[self.stage.stage]}{_departure(self.stage)}"

    def record(self) -> dict[str, Any]:
        """JSON-ready."""
        named = None if self.stage is None else dataclasses.asdict(self.stage)
        return {
            "case_id": self.case_id,
            "impl": self.impl,
            "pick": self.pick,
            "slower_by": self.slower_by,
            "source": self.source,
            "stage": named,
            "rule": self.rule,
            "standing": self.standing,
            "text": self.text,
        }


def explain(run: Run, cases: Sequence[str] = (), impls: Sequence[str] = ()) -> list[Explanation]:
    """One explanation per clearly-slower row of each case (only ``cases`` and ``impls`` when given)."""
    return explain_answers(answer(run), cases, impls)


def explain_answers(answers: RunAnswers, cases: Sequence[str] = (), impls: Sequence[str] = ()) -> list[Explanation]:
    """:func:`explain` on a run already read for advice (advise cites these without reading the run twice).

    Unasked, every row slower than its case's fastest: clearly slower, or slower by at least ``TIE_MARGIN`` by its
    median where the case cannot tell (no interval, rounds that disagree), which the sentence says. Asked about
    with ``impls``, each of them whatever it stands, the pick included: its own stages, costliest first."""
    _check_filters(answers, cases, impls)
    kernels = read_kernels(answers.run.path)
    found = []
    for case in answers.cases:
        if cases and case.case_id not in cases and case.label not in cases:
            continue
        fastest = answers.picks[case.case_id].impls[:1]
        pick_row = case.row(fastest[0]) if fastest else None
        if pick_row is None:
            continue
        for row in case.rows:
            impl = str(row["impl"])
            if (impls and impl not in impls) or row.get("status") != RowStatus.OK:
                continue
            if impl == fastest[0]:
                if impls:
                    found.append(_explained(case, row, None, 1.0, kernels, "pick"))
                continue
            ratio = lead(pick_row, row).interval
            state = standing(ratio, pick_row, row)
            slower = state == SLOWER or (ratio.ratio >= 1 + TIE_MARGIN and state == CANNOT_TELL)
            if slower or impls:
                found.append(_explained(case, row, pick_row, ratio.ratio, kernels, str(state)))
    return found


def _check_filters(answers: RunAnswers, cases: Sequence[str], impls: Sequence[str]) -> None:
    """A ``--case`` or ``--impl`` the run does not hold is a typo, not "nothing is slower": refuse it in one line."""
    known_cases = {name for case in answers.cases for name in (case.case_id, case.label)}
    for value in cases:
        if value not in known_cases:
            raise InputError(f"--case: {value!r} is no case id or label of run {answers.run.run_id}")
    known_impls = sorted({str(row["impl"]) for case in answers.cases for row in case.rows})
    for value in impls:
        if value not in known_impls:
            raise InputError(f"--impl: {value!r} is not in run {answers.run.run_id} (it has {', '.join(known_impls)})")


def row_stages(row: Mapping[str, Any], kernels: pd.DataFrame | None) -> tuple[list[StageFigures], str]:
    """A row's breakdown and its source: its own cell, or derived from kernels.csv when it holds none."""
    figures = read_breakdown(row.get("stage_breakdown"))
    source = str(row.get("breakdown_source") or "")
    if figures and source != "kernels":
        return figures, source
    mine = _kernels_of(row, kernels)
    if mine:
        units = kernel_units(mine)
        counted = all(unit.flops is not None for unit in units)
        return breakdown(units, _model(row)), "counters" if counted else "kernels"
    return figures, source or "none: a run older than breakdowns, with no kernels.csv to derive one from"


def _kernels_of(row: Mapping[str, Any], kernels: pd.DataFrame | None) -> list[dict[str, Any]]:
    if kernels is None or kernels.empty:
        return []
    repeat = int(pd.to_numeric(row.get("repeat"), errors="coerce") or 0)
    mine = kernels[(kernels["case_id"] == row["case_id"]) & (kernels["impl"] == row["impl"])]
    mine = mine[pd.to_numeric(mine["repeat"], errors="coerce").fillna(0).astype(int) == repeat]
    return mine.sort_values("kernel").to_dict("records")


def _model(row: Mapping[str, Any]) -> dict[str, Any] | None:
    shaped = row_case(row)
    try:
        spec = get_spec(str(row["impl"]))
    except Exception:  # a plugin not loaded here: its stages have no model figures
        return None
    return stage_costs(spec.cost, shaped.workload()) if shaped is not None and spec.cost else None


def _explained(
    case: MeasuredCase,
    row: Mapping[str, Any],
    pick_row: Mapping[str, Any] | None,
    slower_by: float,
    kernels: pd.DataFrame | None,
    state: str,
) -> Explanation:
    """``pick_row`` None: ``row`` is the case's fastest, asked about; its stages are read on their own."""
    impl = str(row["impl"])
    pick = str(pick_row["impl"]) if pick_row is not None else impl
    figures, source = row_stages(row, kernels)
    pick_figures = row_stages(pick_row, kernels)[0] if pick_row is not None else []
    named = _costliest_beyond(_at_latency(figures, row), _at_latency(pick_figures, pick_row or row))
    head = f"{wording.impl(impl)} ({_standing_words(state, slower_by, pick)}){_dtype_clause(impl, case)}"
    if named is None:
        text = f"{head}: no stage breakdown ({source.removeprefix('none: ')})"
        found = (case.case_id, case.label, impl, pick, slower_by, source, None, "", text, tuple(figures), state)
        return Explanation(*found)
    matched = first_match(named)
    rule = matched[0].name if matched else ""
    text = f"{head}: {_share(named)} of its time in the {STAGE_LABELS[named.stage]}{_departure(named)}"
    if matched is not None:
        text += ": " + matched[0].says.format(**matched[1])
        remedy = REMEDIES.get(impl, {}).get(rule)
        text += f"; {remedy}" if remedy else ""
    elif departs(named):
        text += "; no rule knows this departure"
    elif named.stage == "other":
        text += "; the model prices nothing there: time no op of a known kind covers (Python, dispatch, views)"
    elif named.model_flops is None and named.model_bytes is None:
        text += f"; its model prices no such stage: work its layout adds (`{named.top_op}`)"
    else:
        text += "; the stage runs the model's work, only slower than the pick's"
    return Explanation(
        case.case_id, case.label, impl, pick, slower_by, source, named, rule, text, tuple(figures), state
    )


def _standing_words(state: str, slower_by: float, pick: str) -> str:
    """How the row stands against the case's fastest, as the sentence opens."""
    if state == "pick":
        return "the case's fastest"
    if state == SLOWER:
        return f"{slower_by:.3g}× slower than {wording.impl(pick)}"
    if state == CANNOT_TELL:
        return f"{slower_by:.3g}× slower than {wording.impl(pick)} by its median; no interval says how surely"
    return f"tied with {wording.impl(pick)}, {slower_by:.3g}× by its median"


def _dtype_clause(impl: str, case: MeasuredCase) -> str:
    """Where the implementation computes in a wider dtype than its case's (a float64 plugin): said, since every
    byte and FLOP the model prices for the case is at the case's width."""
    wider, own = compute_dtype(impl), str(case.fields.get("dtype") or "")
    if not wider or not own or _itemsize(wider) is None or _itemsize(own) is None:
        return ""
    if (_itemsize(wider) or 0) <= (_itemsize(own) or 0):
        return ""
    ratio = (_itemsize(wider) or 0) // (_itemsize(own) or 1)
    return (
        f"; it computes in {wider}, wider than the case's {own}: the model prices its stages at {own}, so its "
        f"bytes read about {ratio}× the model's from the dtype alone"
    )


def _itemsize(name: str) -> int | None:
    found = getattr(torch, name, None)
    return found.itemsize if isinstance(found, torch.dtype) else None


def _at_latency(figures: Sequence[StageFigures], row: Mapping[str, Any]) -> list[StageFigures]:
    """Each stage's time as its share of the row's median latency: two profiled calls' own milliseconds carry the
    profiler's overhead and whatever else the machine did then; the medians are what the rows compare on."""
    latency_ms = pd.to_numeric(row.get("latency_ms"), errors="coerce")
    if pd.isna(latency_ms):
        return list(figures)
    return [
        dataclasses.replace(figure, time_ms=figure.time_share * float(latency_ms))
        for figure in figures
        if not math.isnan(figure.time_share)
    ]


def _costliest_beyond(figures: Sequence[StageFigures], pick_figures: Sequence[StageFigures]) -> StageFigures | None:
    """The largest stage of the family whose time exceeds the pick's the most, a departing family first."""
    if not figures:
        return None
    pick_ms: dict[str, float] = {}
    for figure in pick_figures:
        family = FAMILY.get(figure.stage, figure.stage)
        pick_ms[family] = pick_ms.get(family, 0.0) + figure.time_ms
    mine: dict[str, list[StageFigures]] = {}
    for figure in figures:
        mine.setdefault(FAMILY.get(figure.stage, figure.stage), []).append(figure)
    excess = {name: sum(f.time_ms for f in stages) - pick_ms.get(name, 0.0) for name, stages in mine.items()}
    # a stage that departs from the model and costs more than the pick's is the answer before one that only runs
    # slower: on a loaded machine two profiled calls' shares move by a few points, a 100× departure does not
    departing = [name for name in mine if excess[name] > 0 and any(departs(f) for f in mine[name])]
    family = max(departing or list(mine), key=lambda name: excess[name])
    return max(mine[family], key=lambda figure: figure.time_ms)


def _share(figure: StageFigures) -> str:
    return wording.percent(figure.time_share) if not math.isnan(figure.time_share) else "an unknown share"


def _departure(figure: StageFigures) -> str:
    """``, which executed 8.0× the model's FLOPs and read 485× its bytes`` where the figures exist."""
    parts = []
    if figure.flops_ratio is not None:
        parts.append(f"executed {figure.flops_ratio:.1f}× the model's FLOPs")
    if figure.bytes_ratio is not None:
        ratio = figure.bytes_ratio
        parts.append(f"moved {ratio:,.0f}× its bytes" if ratio >= 100 else f"moved {ratio:.3g}× its bytes")
    return ", which " + " and ".join(parts) if parts else ""


def compute_dtype(impl: str) -> str | None:
    """The registered dtype an implementation computes in when it is not its case's; None otherwise or unknown."""
    try:
        return get_spec(impl).compute_dtype
    except UnknownImplementationError:
        return None
