"""Why each implementation slower than a case's fastest is slower, stage by stage (docs/stages.md).

Per row slower than its case's fastest, or any row asked about (the fastest included): its breakdown (the row's
``stage_breakdown``, or derived from the run's kernels.csv where the run profiled kernels and the row holds none,
a run recorded before breakdowns existed), the stage that costs most beyond the fastest row's (stages grouped so a
fused attention kernel compares with scores + softmax + P·V), how far that stage's FLOPs and bytes are from the
cost model's, the dtype it computes in where that is wider than its case's, and which rule of
:mod:`mhabench.analysis.explain.rules` the stage shows. Who is slower, and by how much, is the run's answer
record's (:mod:`mhabench.analysis.answer`); nothing runs: everything comes from the run folder.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from mhabench.analysis.answer import CaseAnswer, ImplAnswer, RunAnswer, Standing, answer_run, slower_by_median
from mhabench.analysis.explain.rules import departs, first_match
from mhabench.analysis.pooled_rows import middle_process
from mhabench.analysis.row_case import row_case
from mhabench.analysis.statement import WHY, Statement
from mhabench.errors import InputError
from mhabench.impls.registry import get_spec
from mhabench.measure.stages import breakdown, kernel_units
from mhabench.results.columns import CASE_ID, IMPL, REPEAT
from mhabench.results.kernels import read_kernels
from mhabench.results.stages import StageFigures, read_breakdown
from mhabench.results.store import Run
from mhabench.stage_cost import stage_costs

FAMILY = {"scores": "attention", "mask_softmax": "attention", "pv": "attention"}
"""Stages compared as one across implementations: a fused kernel does the work of all three."""
SLOWER, CANNOT_TELL, TIED, PICK = "clearly slower", "cannot tell", "tied", "pick"
"""How an explained row stands against its case's fastest (``Explanation.standing``)."""
NO_BREAKDOWN, NO_RULE, OTHER_STAGE, UNPRICED_STAGE, SLOWER_STAGE = (
    "no_breakdown",
    "no_rule",
    "other_stage",
    "unpriced_stage",
    "slower_stage",
)
"""What an explanation finds where no rule of :mod:`mhabench.analysis.explain.rules` matches its stage: no
breakdown at all; a departure no rule knows; time in no op of a known kind; a stage its model prices nothing for;
the model's work, only slower."""
EXPLAINED = "explained"
"""The rule of the statement advise shows for each explained row."""
NO_SOURCE = "none"
"""The breakdown source of a row that holds none and has no kernels.csv to derive one from (a run older than
breakdowns)."""


@dataclasses.dataclass(frozen=True)
class Explanation:
    """Why one row is slower than its case's pick: the stage named, its figures, and what it shows (``finding``: a
    rule of :mod:`mhabench.analysis.explain.rules` with ``rule_figures``, or one of the codes above)."""

    case_id: str
    case_label: str
    impl: str
    pick: str
    slower_by: float
    source: str
    stage: StageFigures | None
    finding: str
    rule_figures: Mapping[str, Any]
    stages: tuple[StageFigures, ...]
    standing: str = SLOWER
    """``clearly slower``, ``cannot tell`` (slower by its median only), ``tied``, or ``pick`` (asked about)."""
    compute_dtype: str | None = None
    """The dtype it computes in where that is wider than its case's ``case_dtype``."""
    case_dtype: str = ""

    @property
    def rule(self) -> str:
        """The rule its stage shows, "" where none does."""
        return "" if self.finding in CODES else self.finding

    @property
    def dtype_ratio(self) -> int:
        """How many times wider its compute dtype is than its case's (1 where it is not)."""
        if self.compute_dtype is None:
            return 1
        return (_itemsize(self.compute_dtype) or 1) // (_itemsize(self.case_dtype) or 1)

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
            "finding": self.finding,
            "rule": self.rule,
            "rule_figures": dict(self.rule_figures),
            "standing": self.standing,
            "compute_dtype": self.compute_dtype,
            "case_dtype": self.case_dtype,
        }


CODES = (NO_BREAKDOWN, NO_RULE, OTHER_STAGE, UNPRICED_STAGE, SLOWER_STAGE)


def explain(
    run: Run, cases: Sequence[str] = (), impls: Sequence[str] = (), record: RunAnswer | None = None
) -> list[Explanation]:
    """One explanation per row slower than its case's fastest (only ``cases`` and ``impls`` when given), read
    against ``record`` (the run's answer; computed here when not given).

    Unasked, every row slower than its case's fastest: clearly slower, or slower by at least the tie margin by its
    median where the case cannot tell (no interval), which its standing says. Asked about with ``impls``, each of
    them whatever it stands, the pick included: its own stages, costliest first."""
    record = record or answer_run(run)
    _check_filters(record, cases, impls)
    kernels = read_kernels(run.path)
    rows = _rows(run, record.replicated)
    found = []
    for case in record.cases:
        if cases and case.case_id not in cases and case.label not in cases:
            continue
        pick_row = rows.get((case.case_id, case.fastest or ""))
        if pick_row is None:
            continue
        for one in case.impls:
            if (impls and one.impl not in impls) or one.median_ms is None:
                continue
            state = _standing(case, one)
            if state == PICK and impls:
                found.append(_explained(case, rows[(case.case_id, one.impl)], None, 1.0, kernels, state))
            elif state != PICK and (
                state == SLOWER or (state == CANNOT_TELL and slower_by_median(case, one.impl)) or impls
            ):
                ratio = one.vs_pick.ratio if one.vs_pick else math.nan
                found.append(_explained(case, rows[(case.case_id, one.impl)], pick_row, ratio, kernels, state))
    return found


def _standing(case: CaseAnswer, one: ImplAnswer) -> str:
    """The record's standing in explain's words: a slower row without an interval "cannot tell"."""
    if one.impl == case.fastest:
        return PICK
    if one.standing is Standing.SLOWER:
        return SLOWER
    if one.standing is Standing.UNKNOWN and not (one.vs_pick and one.vs_pick.has_interval):
        return CANNOT_TELL
    return TIED


def _rows(run: Run, replicated: bool) -> dict[tuple[str, str], dict[str, Any]]:
    """The row the record quotes per (case, implementation): the first repeat's, or for a replicated run the
    process its pooled table shows."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in run.frame.to_dict("records"):
        by_key.setdefault((str(row[CASE_ID]), str(row[IMPL])), []).append(row)
    if replicated:
        return {key: middle_process(rows) or rows[0] for key, rows in by_key.items()}
    return {key: min(rows, key=lambda row: _repeat(row)) for key, rows in by_key.items()}


def _repeat(row: Mapping[str, Any]) -> int:
    value = pd.to_numeric(row.get(REPEAT), errors="coerce")
    return 0 if pd.isna(value) else int(value)


def _check_filters(record: RunAnswer, cases: Sequence[str], impls: Sequence[str]) -> None:
    """A ``--case`` or ``--impl`` the run does not hold is a typo, not "nothing is slower": refuse it in one line."""
    known_cases = {name for case in record.cases for name in (case.case_id, case.label)}
    for value in cases:
        if value not in known_cases:
            raise InputError(f"--case: {value!r} is no case id or label of run {record.run_id}")
    known_impls = sorted({one.impl for case in record.cases for one in case.impls})
    for value in impls:
        if value not in known_impls:
            raise InputError(f"--impl: {value!r} is not in run {record.run_id} (it has {', '.join(known_impls)})")


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
    return figures, source or NO_SOURCE


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
    case: CaseAnswer,
    row: Mapping[str, Any],
    pick_row: Mapping[str, Any] | None,
    slower_by: float,
    kernels: pd.DataFrame | None,
    state: str,
) -> Explanation:
    """``pick_row`` None: ``row`` is the case's fastest, asked about; its stages are read on their own."""
    impl = str(row[IMPL])
    pick = str(pick_row[IMPL]) if pick_row is not None else impl
    figures, source = row_stages(row, kernels)
    pick_figures = row_stages(pick_row, kernels)[0] if pick_row is not None else []
    named = _costliest_beyond(_at_latency(figures, row), _at_latency(pick_figures, pick_row or row))
    matched = first_match(named) if named is not None else None
    found = _finding(named, matched[0].name if matched else "")
    own = case.impl(impl)
    wider = _wider(own.compute_dtype if own else None, case.dtype)
    rule_figures = dict(matched[1]) if matched else {}
    return Explanation(
        case.case_id,
        case.label,
        impl,
        pick,
        slower_by,
        source,
        named,
        found,
        rule_figures,
        tuple(figures),
        state,
        wider,
        case.dtype,
    )


def _finding(named: StageFigures | None, rule: str) -> str:
    if named is None:
        return NO_BREAKDOWN
    if rule:
        return rule
    if departs(named):
        return NO_RULE
    if named.stage == "other":
        return OTHER_STAGE
    if named.model_flops is None and named.model_bytes is None:
        return UNPRICED_STAGE
    return SLOWER_STAGE


def _wider(compute_dtype: str | None, own: str) -> str | None:
    """``compute_dtype`` where it is wider than the case's dtype (a float64 plugin): every byte and FLOP the model
    prices for the case is at the case's width."""
    if not compute_dtype or not own or _itemsize(compute_dtype) is None or _itemsize(own) is None:
        return None
    return compute_dtype if (_itemsize(compute_dtype) or 0) > (_itemsize(own) or 0) else None


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


def citations(run: Run, record: RunAnswer) -> list[Statement]:
    """What advise shows of explain: per row it would explain unasked that has a breakdown, the stage and its
    departure, pointing at ``mhabench explain`` for the rest."""
    groups = {case.case_id: case.group for case in record.cases}
    return [
        Statement(
            WHY,
            EXPLAINED,
            groups[found.case_id],
            found.case_label,
            {
                "impl": found.impl,
                "slower_by": found.slower_by,
                "standing": found.standing,
                "run_id": record.run_id,
                "stage": found.stage.stage,
                "time_share": found.stage.time_share,
                "flops_ratio": found.stage.flops_ratio,
                "bytes_ratio": found.stage.bytes_ratio,
                "explain_rule": found.rule,
                "breakdown_source": found.source,
            },
        )
        for found in explain(run, record=record)
        if found.stage is not None
    ]
